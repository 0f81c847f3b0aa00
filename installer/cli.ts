// The installer's entry point: the command line's arguments to main, its exit code to the process.
// `npm run installer` and the package bin load it through tsx; the air-gap kit runs it bundled into
// one file (installer/build.ts).
import { main } from './main.js'

process.exitCode = await main(process.argv.slice(2))
