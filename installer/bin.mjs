#!/usr/bin/env node
// The installer as a package bin (`npx atrium-installer`): loads the TypeScript sources through tsx,
// as `npm run installer` does.
import { register } from 'tsx/esm/api'

register()
const { main } = await import('./main.tsx')
process.exitCode = await main(process.argv.slice(2))
