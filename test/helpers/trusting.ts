// `node --import tsx test/helpers/trusting.ts '<trusted keys JSON>' serve|<admin command> [options]`:
// the server or the admin CLI trusting license keys a test made, handed over in code as tests do in
// process. Nothing the server reads (no setting) can add a trusted key.
import type { TrustedKey } from '../../licenses/keys.js'
import { main } from '../../server/cli.js'

const [keys, ...argv] = process.argv.slice(2)
main(argv, { license: { keys: JSON.parse(keys ?? '[]') as TrustedKey[] } })
