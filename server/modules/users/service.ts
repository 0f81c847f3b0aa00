// What other modules may use of the users module: creating accounts (tenants, OAuth, invitations)
// and the member operations the team module's rules run in their own transactions.
export {
  activateInvited,
  deleteMember,
  insertUser,
  listMembers,
  lockMemberAndOwners,
  selectMember,
  updateMember,
  type MemberRow,
} from './store.js'
