// Loaded (--import) into the test runner and into each test file's process
// by scripts/test.mjs. A file's process sends its report to the runner
// through its stdout, a pipe, and with --test-force-exit it ends with
// process.exit() as soon as its tests are done. On Linux a write to a pipe
// may still be queued at that moment, and the exit drops it: the runner then
// never hears the verdicts of the file's last tests, counts fewer tests and
// exits 0 (nodejs/node#64833; seen in CI run 21: the last eight pair tests
// of test/diskqueue/pairs.test.ts went unreported). Blocking writes leave
// nothing queued. scripts/file-times.mjs fails the run if a verdict is lost
// all the same.
const handle = process.stdout._handle;
if (handle && typeof handle.setBlocking === 'function') handle.setBlocking(true);
