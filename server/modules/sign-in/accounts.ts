// What other modules may use of the auth module's accounts and sessions (team, OAuth and device
// login find accounts; the team ends a member's sessions). Its store stays its own.
export { findAccount, findAccountsByEmail, revokeUserSessions, type AccountRow } from './store.js'
