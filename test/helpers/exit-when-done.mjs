// Preloaded into every test process (package.json's tap "node-arg"). Once a test file has finished, its event loop
// empty and 'exit' emitted, the process leaves at once instead of going through Node's teardown of its handles, which
// was seen here spinning forever: the main thread in FreeEnvironment -> CleanupHandles -> uv_run (gdb), no syscall,
// no handle left, a request count that never reached zero. tap then waited for the file's timeout and counted a file
// whose assertions had all passed as failed. A handle still open keeps the loop alive and 'exit' unemitted, so this
// hides no leak; and an explicit process.exit() never reaches 'beforeExit', so it is untouched.
// Registered at the first 'beforeExit', after every 'exit' listener the test and tap set up at import, so those run
// first; process.exit() inside an 'exit' listener exits without emitting 'exit' again.
process.once('beforeExit', () => process.on('exit', (code) => process.exit(process.exitCode ?? code)))
