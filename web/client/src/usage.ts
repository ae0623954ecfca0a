// Usage records are each Agent program's own (docs/api.md: "the vendor's usage record
// verbatim"). summarizeUsage reads the shapes the built-in programs report into the few
// figures a console shows with each response.

export interface UsageSummary {
  inputTokens?: number;
  outputTokens?: number;
  costUSD?: number;
  /** costUSD is the program's running total for its session, not this response's own. */
  costIsTotal?: boolean;
  models: string[];
}

type Rec = Record<string, unknown>;

const isRec = (v: unknown): v is Rec => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

export function summarizeUsage(usage: unknown): UsageSummary | null {
  if (!isRec(usage)) return null;
  const out: UsageSummary = { models: [] };
  // Claude Code: {total_cost_usd, usage: {input_tokens, output_tokens, ...}, modelUsage: {<model>: {...}}}
  const inner = isRec(usage.usage) ? usage.usage : usage;
  out.inputTokens = num(inner.input_tokens) ?? num(inner.inputTokens);
  out.outputTokens = num(inner.output_tokens) ?? num(inner.outputTokens);
  // Claude Code's total_cost_usd is the running total of its session.
  out.costUSD = num(usage.total_cost_usd);
  if (out.costUSD !== undefined) out.costIsTotal = true;
  out.costUSD ??= num(usage.cost_usd) ?? num(usage.costUSD);
  if (isRec(usage.modelUsage)) out.models.push(...Object.keys(usage.modelUsage));
  // Codex: {total: {inputTokens, outputTokens, ...}, last: {...}}
  if (isRec(usage.total)) {
    out.inputTokens ??= num(usage.total.inputTokens);
    out.outputTokens ??= num(usage.total.outputTokens);
  }
  // Pi and others: {input, output, cost: {total}} or {model}
  out.inputTokens ??= num(usage.input);
  out.outputTokens ??= num(usage.output);
  if (isRec(usage.cost)) out.costUSD ??= num(usage.cost.total);
  if (typeof usage.model === 'string') out.models.push(usage.model);
  if (out.inputTokens === undefined && out.outputTokens === undefined && out.costUSD === undefined && out.models.length === 0) {
    return null;
  }
  return out;
}
