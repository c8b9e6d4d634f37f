// tsc compiles TypeScript only; the numbered SQL migrations ship beside the compiled store code.
// The folder is replaced whole, so that a file removed from the sources is not left behind.
import { cpSync, rmSync } from 'node:fs'

rmSync('dist/store/migrations', { recursive: true, force: true })
cpSync('src/store/migrations', 'dist/store/migrations', { recursive: true })
