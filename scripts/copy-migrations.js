// tsc compiles TypeScript only; the numbered SQL migrations ship beside the compiled store code.
import { cpSync } from 'node:fs'

cpSync('src/store/migrations', 'dist/store/migrations', { recursive: true })
