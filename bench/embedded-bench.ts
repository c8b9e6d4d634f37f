/**
 * `npm run bench:embedded`: the embedded store at each data shape (embedded-shapes.ts), or, with
 * `--scale APPOINTMENTS,CUSTOMERS`, at one operator's size through a load, restarts and an hour of
 * writes (embedded-scale.ts).
 */
const scale = process.argv.slice(2).some((arg) => arg === '--scale' || arg.startsWith('--scale='))
await import(scale ? './embedded-scale.js' : './embedded-shapes.js')
