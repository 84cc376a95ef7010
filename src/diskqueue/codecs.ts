/** The codecs live in src/codecs.ts, shared with `ferry/queue`. */
export { codecs, type Codec } from '../codecs.js';
