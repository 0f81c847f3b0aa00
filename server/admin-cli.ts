// How to run the admin CLI in this installation, for the hints the server and the CLI print:
// compiled (npm start, the container image) the built file itself, which is what works in the
// image (it has no npm scripts and no sources); from source (npm run dev, tests) the npm script.
import { fileURLToPath } from 'node:url'

export const ADMIN_CLI = import.meta.url.endsWith('.js')
  ? `node ${fileURLToPath(new URL('./cli.js', import.meta.url))}`
  : 'npm run --silent admin --'
