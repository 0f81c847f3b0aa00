#!/usr/bin/env node
// The installer as a package bin (`npx atrium-installer`): loads the TypeScript sources through tsx,
// as `npm run installer` does.
import { register } from 'tsx/esm/api'

register()
await import('./cli.ts')
