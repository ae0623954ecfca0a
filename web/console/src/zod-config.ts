// Imported first by main.tsx, before any module defines a schema: the stream parser
// validates with zod, which otherwise probes `new Function` when its first object schema
// is built, and the console's Content-Security-Policy (no unsafe-eval) reports that probe
// as a violation.
import { z } from 'zod';

z.config({ jitless: true });
