// validate-ui-stream.mjs checks an AI SDK UI Message Stream with the pinned `ai` client's
// own code: parseJsonEventStream + uiMessageChunkSchema for every chunk, then
// readUIMessageStream to assemble the UI messages a browser would hold.
//
// Input (stdin, one JSON object), as internal/uicheck sends it:
//   {"chunks": [<chunk>, ...]}          chunks are framed as SSE (`data: <json>\n\n`,
//                                       ending with `data: [DONE]\n\n`) before parsing
//   {"sse": "<raw SSE text>"}           the exact bytes a server sent
//   optional "message": <UIMessage>     the last assistant message a continuation
//                                       stream appends to
// Or, for people: node validate-ui-stream.mjs FILE.sse
//
// Output (stdout, one JSON object):
//   {"chunk_count", "chunk_errors": [{"index","message","raw"}], "framing_errors": [...],
//    "done": bool, "stream_error": {"index","message"}|null, "error_chunks": [text...],
//    "messages": [<UIMessage>...]}
// Exit code 0 when the report was produced (valid or not), 2 on usage or I/O errors.

import { readFileSync } from 'node:fs';
import { parseJsonEventStream, uiMessageChunkSchema, readUIMessageStream } from 'ai';

function readInput() {
  const file = process.argv[2];
  if (file) {
    return { sse: readFileSync(file, 'utf8') };
  }
  const text = readFileSync(0, 'utf8');
  return JSON.parse(text);
}

function frameChunks(chunks) {
  return chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n';
}

// scanFraming splits SSE text into events the way eventsource-parser does (blank line
// ends an event) to report what the client would silently drop.
function scanFraming(sse) {
  const errors = [];
  const normalized = sse.replace(/^\uFEFF/, '').replace(/\r\n?/g, '\n');
  const blocks = normalized.split('\n\n');
  const tail = blocks.pop();
  if (tail.trim() !== '') {
    errors.push('the last event is not terminated by a blank line: the client drops it');
  }
  let done = false;
  let afterDone = false;
  for (const block of blocks) {
    const dataLines = block.split('\n').filter((l) => l.startsWith('data:'));
    if (dataLines.length === 0) continue;
    const data = dataLines.map((l) => l.slice(5).replace(/^ /, '')).join('\n');
    if (data === '[DONE]') {
      done = true;
    } else if (done) {
      afterDone = true;
    }
  }
  if (afterDone) errors.push('events follow data: [DONE]');
  return { errors, done };
}

function streamFrom(text) {
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
}

function chunkStream(chunks) {
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(c);
      controller.close();
    },
  });
}

// assemble runs chunks through readUIMessageStream and returns the last snapshot of
// each message (a new messageId starts a new message), the protocol error if any, and
// the texts of error chunks.
async function assemble(chunks, message) {
  const errorChunks = [];
  let streamError = null;
  const order = [];
  const byId = new Map();
  const stream = readUIMessageStream({
    stream: chunkStream(chunks),
    message,
    terminateOnError: false,
    onError: (e) => {
      const isErrorChunk = chunks.some((c) => c.type === 'error' && c.errorText === e?.message);
      if (isErrorChunk) errorChunks.push(e.message);
      else if (!streamError) streamError = String(e?.message ?? e);
    },
  });
  try {
    for await (const snapshot of stream) {
      if (!byId.has(snapshot.id)) order.push(snapshot.id);
      byId.set(snapshot.id, snapshot);
    }
  } catch (e) {
    if (!streamError) streamError = String(e?.message ?? e);
  }
  return { messages: order.map((id) => byId.get(id)), streamError, errorChunks };
}

// locateStreamError finds the first chunk whose processing fails, by bisecting prefixes.
async function locateStreamError(chunks, message) {
  let lo = 1;
  let hi = chunks.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const { streamError } = await assemble(chunks.slice(0, mid), message);
    if (streamError) hi = mid;
    else lo = mid + 1;
  }
  return lo - 1;
}

// describeParseError turns the schema's union failure into the issues of the member
// whose type matched, e.g. `output: Invalid input: expected nonoptional, received undefined`.
function describeParseError(error) {
  const issues = error?.cause?.issues;
  if (!Array.isArray(issues)) return String(error?.message ?? error);
  const flat = [];
  for (const issue of issues) {
    if (issue.code === 'invalid_union' && Array.isArray(issue.errors)) {
      const matching = issue.errors.filter(
        (branch) => !branch.some((i) => i.path?.length === 1 && i.path[0] === 'type'),
      );
      if (matching.length > 0) {
        for (const i of matching[0]) flat.push(`${(i.path ?? []).join('.')}: ${i.message}`);
        continue;
      }
      flat.push('unknown chunk type');
      continue;
    }
    flat.push(`${(issue.path ?? []).join('.')}: ${issue.message}`);
  }
  return flat.join('; ');
}

async function main() {
  let input;
  try {
    input = readInput();
  } catch (e) {
    process.stderr.write(`validate-ui-stream: cannot read input: ${e.message}\n`);
    process.exit(2);
  }
  const sse = typeof input.sse === 'string' ? input.sse : frameChunks(input.chunks ?? []);
  const framing = scanFraming(sse);

  const chunkErrors = [];
  const valid = [];
  const validIndex = [];
  let index = 0;
  const results = parseJsonEventStream({ stream: streamFrom(sse), schema: uiMessageChunkSchema });
  for await (const r of results) {
    if (r.success) {
      valid.push(r.value);
      validIndex.push(index);
    } else {
      chunkErrors.push({ index, message: describeParseError(r.error), raw: r.rawValue ?? null });
    }
    index++;
  }

  const { messages, streamError, errorChunks } = await assemble(valid, input.message);
  let located = null;
  if (streamError) {
    located = { index: validIndex[await locateStreamError(valid, input.message)], message: streamError };
  }
  const report = {
    chunk_count: index,
    chunk_errors: chunkErrors,
    framing_errors: framing.errors,
    done: framing.done,
    stream_error: located,
    error_chunks: errorChunks,
    messages,
  };
  process.stdout.write(JSON.stringify(report));
}

main().catch((e) => {
  process.stderr.write(`validate-ui-stream: ${e?.stack ?? e}\n`);
  process.exit(2);
});
