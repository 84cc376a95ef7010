/**
 * Runs one program against the model and prints the first broken invariant:
 * the way to look at a counterexample fast-check printed, before adding it to
 * corpus.json.
 *
 *   node --import tsx test/diskqueue/fuzz/replay.ts '{"policy":"perOp","cmds":[{"op":"add","n":1}]}'
 */
import { runProgram, type Program } from './model.js';

const program = JSON.parse(process.argv[2] ?? '') as Program;
try {
  await runProgram(program);
  console.log('every invariant held');
} catch (err) {
  console.log(err);
  process.exitCode = 1;
}
