// The installer's checks return what every check returns (common/checks.ts, shared with the server).
export * from '../../../common/checks.js'
