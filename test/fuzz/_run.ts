import { runProgram } from './model.js';
const p = JSON.parse(process.argv[2]!);
try { await runProgram(p); console.log('ok'); } catch (e) { console.log(e); }
