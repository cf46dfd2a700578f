import { measureIdle } from './bench/tick.js';
const r = await measureIdle({ totals: [500, 2000] });
console.log(JSON.stringify(r));
process.exit(0);
