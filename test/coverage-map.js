// Which source files each test file covers, for tap's coverage report. A module's tests cover the
// whole module folder; any other test covers the file it mirrors. Lines are then counted only when
// their own tests run them, not by accident through some other test.
// Policy: coverage is reported, not enforced (package.json "tap": allow-incomplete-coverage).
export default function coverageMap(testFile) {
  // The client package's tests cover the package (its sources are in client/src/).
  if (testFile.startsWith('test/client/')) return ['client/src/**/*.ts']
  // The browser tests cover the pages, the docs and the client library as a browser runs them.
  if (testFile.startsWith('test/browser/'))
    return [
      'server/http/pages.ts',
      'server/http/openapi.ts',
      'server/modules/cli-auth/**/*.ts',
      'server/modules/team/**/*.ts',
      'client/src/**/*.ts',
    ]
  const mirrored = testFile.replace(/^test\//, '').replace(/\.test\.ts$/, '.ts')
  const module = /^server\/modules\/[^/]+\//.exec(mirrored)
  return module ? [`${module[0]}**/*.ts`] : [mirrored]
}
