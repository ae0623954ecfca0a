// End-to-end test of the web console in Debian's Chromium (playwright-core, no browser
// download) against a running AstraBox: SERVICE_URL, ACCESS_TOKEN and AGENT_ID as
// `astrabox dev` writes them in dev.env (the Go test cmd/astrabox TestConsoleInChromium
// starts that stack with the real Claude Code and the scripted model server, then runs
// this). Screenshots of each view go to E2E_OUT. Exits non-zero on the first failure.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = need('SERVICE_URL').replace(/\/$/, '');
const token = need('ACCESS_TOKEN');
const agentId = need('AGENT_ID');
const out = process.env.E2E_OUT ?? join(process.cwd(), 'e2e-out');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
mkdirSync(out, { recursive: true });
for (const f of ['failure-owner.png', 'failure-viewer.png']) rmSync(join(out, f), { force: true });

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

const step = (what) => console.log(`[console e2e] ${new Date().toISOString().slice(11, 23)} ${what}`);
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function api(method, path, body) {
  const res = await fetch(`${base}/api/v1${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const env = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(env)}`);
  return env.data;
}

const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const profiles = [];
async function newContext() {
  const dir = mkdtempSync(join(tmpdir(), 'astrabox-console-e2e-'));
  profiles.push(dir);
  return chromium.launchPersistentContext(dir, { executablePath: chromiumPath, headless: true, args, viewport: { width: 1280, height: 800 } });
}

const errors = [];
function watch(page, who) {
  // A Content-Security-Policy violation, with what was blocked and where.
  page.exposeFunction('__cspViolation', (v) => errors.push(`${who}: CSP ${v}`)).catch(() => {});
  page.addInitScript(() =>
    document.addEventListener('securitypolicyviolation', (e) =>
      window.__cspViolation(`${e.violatedDirective} blocked ${e.blockedURI} at ${e.sourceFile}:${e.lineNumber}:${e.columnNumber} ${e.sample}`),
    ),
  );
  page.on('pageerror', (e) => errors.push(`${who}: ${e.message}`));
  page.on('console', (m) => {
    // A reload aborts the open stream's fetch; Chromium reports that, the app does not fail.
    // Going offline on purpose fails requests; the app retries them.
    if (m.type() === 'error' && !/ERR_ABORTED|ERR_INTERNET_DISCONNECTED|ERR_NETWORK_CHANGED|Failed to load resource/.test(m.text())) {
      const at = m.location();
      errors.push(`${who}: ${m.text()} (${at.url}:${at.lineNumber})`);
    }
  });
}

/** The text of the last agent response in view. */
const lastResponseText = (page) => page.locator('article.msg.assistant').last().locator('.text').allInnerTexts().then((t) => t.join(''));

async function messagesText(sessionId) {
  const page = await api('GET', `/sessions/${sessionId}/messages`);
  const last = page.messages.filter((m) => m.role === 'assistant').at(-1);
  return last.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
}

async function waitIdle(sessionId, timeout = 120_000) {
  const end = Date.now() + timeout;
  for (;;) {
    const s = await api('GET', `/sessions/${sessionId}`);
    if (s.current_responses.length === 0 && s.held_inputs.length === 0 && s.state === 'READY') return s;
    if (Date.now() > end) throw new Error(`session not idle: ${s.state}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function send(page, text) {
  const box = page.getByRole('textbox', { name: 'Message' });
  await box.fill(text);
  await box.press('Enter');
}

const started = Date.now();
let ctxA;
let ctxB;
try {
  ctxA = await newContext();
  const page = ctxA.pages()[0] ?? (await ctxA.newPage());
  watch(page, 'owner');
  page.setDefaultTimeout(90_000);

  step('sign in through the #token link; the fragment is dropped');
  await page.goto(`${base}/#token=${encodeURIComponent(token)}`);
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
  check(!page.url().includes('token='), 'the token left the address bar');
  const agent = await api('GET', `/agents/${agentId}`);
  await page.screenshot({ path: join(out, 'agents.png') });

  step('start a conversation from the Agent');
  await page.getByRole('button', { name: `Start conversation with ${agent.name}` }).click();
  await page.waitForURL(/\/sessions\/[0-9a-f-]+$/);
  const sessionId = page.url().split('/').pop();
  await page.getByRole('textbox', { name: 'Message' }).waitFor();
  // Tool calls need approval in the program's default mode.
  await api('POST', `/sessions/${sessionId}/permission-mode`, { permission_mode: 'default' });

  step('stream a reply and watch it grow');
  await send(page, 'Explain slowly. [[script:slow chunks=40 delay=60ms]]');
  await page.locator('article.msg.assistant .text').first().waitFor();
  const lengths = [];
  for (let i = 0; i < 12; i++) {
    lengths.push((await lastResponseText(page)).length);
    await page.waitForTimeout(100);
  }
  check(new Set(lengths).size >= 3, `the text grew while streaming: ${lengths}`);

  step('reload mid-stream: the response is rebuilt, nothing doubled or missing');
  await page.reload();
  await page.getByRole('textbox', { name: 'Message' }).waitFor();
  await waitIdle(sessionId);
  await page.waitForFunction(() => /Slow chunk 40 of 40/.test([...document.querySelectorAll('article.msg.assistant')].at(-1)?.textContent ?? ''));
  const recorded = await messagesText(sessionId);
  await page.waitForFunction((want) => {
    const all = [...document.querySelectorAll('article.msg.assistant')];
    return all.length === 1 && [...all[0].querySelectorAll('.text')].map((e) => e.textContent).join('') === want;
  }, recorded);
  check((await page.locator('article.msg.user').count()) === 1, 'one user message after the reload');

  step('a message sent while the agent works is queued, then answered in its turn');
  await send(page, 'Explain again. [[script:slow chunks=30 delay=80ms]]');
  await page.waitForFunction(() => /Slow chunk 2 of 30/.test([...document.querySelectorAll('article.msg.assistant')].at(-1)?.textContent ?? ''));
  await send(page, 'And then? [[script:think thought="Plan the answer." text="The queued answer."]]');
  await page.locator('.msg.pending', { hasText: 'And then?' }).waitFor();
  step('archiving while the agent works is refused and explained');
  await page.getByRole('button', { name: /^Actions for / }).first().click();
  await page.getByRole('menuitem', { name: 'Archive' }).click();
  await page.getByRole('alert').filter({ hasText: 'The agent is working in this conversation' }).waitFor();
  await waitIdle(sessionId);
  await page.waitForFunction(() => /The queued answer\./.test([...document.querySelectorAll('article.msg.assistant')].at(-1)?.textContent ?? ''));
  // The queued bubble joins the conversation once the response that lists its input
  // reaches the console, which may be a moment after the answer's text.
  await page.waitForFunction(() => document.querySelectorAll('.msg.pending').length === 0, null, { timeout: 10_000 }).catch(() => {
    throw new Error('check failed: the queued message joined the conversation');
  });
  // Followed live, the answer's reasoning streams inline; an answer that ended before the
  // console followed it is read from the history, its work folded until opened. The view
  // may turn from the one to the other as the history catches up, so whichever shows
  // first is taken, and the work opened if it is folded.
  const answer = page.locator('article.msg.assistant').last();
  const reasoning = answer.locator('.reasoning', { hasText: 'Plan the answer.' });
  const folded = answer.getByRole('button', { name: /^(Show the work|\d+ steps?)/ });
  await reasoning.or(folded).first().waitFor({ state: 'attached' });
  if ((await reasoning.count()) === 0) {
    step('the answer was read from the history: open its work');
    await folded.first().click();
  }
  await reasoning.waitFor({ state: 'attached' });
  const users = await page.locator('article.msg.user .bubble').allInnerTexts();
  check(users.length === 3 && users[2].startsWith('And then?'), `the queued message sits before its answer: ${users}`);

  step('a message sent while offline is sent once when the network returns');
  await ctxA.setOffline(true);
  await send(page, 'Sent offline. [[script:text text="Back online."]]');
  await page.waitForTimeout(1500);
  await ctxA.setOffline(false);
  await page.waitForFunction(() => /Back online\./.test([...document.querySelectorAll('article.msg.assistant')].at(-1)?.textContent ?? ''));
  await waitIdle(sessionId);
  const history = await api('GET', `/sessions/${sessionId}/messages`);
  const offline = history.messages.filter((m) => m.role === 'user' && m.parts.some((p) => p.text?.startsWith('Sent offline.')));
  check(offline.length === 1, `the offline message was accepted once: ${offline.length}`);

  step('a stream cut by a network loss resumes with nothing doubled or missing');
  await send(page, 'Keep going. [[script:slow chunks=30 delay=80ms]]');
  await page.waitForFunction(() => /Slow chunk 3 of 30/.test([...document.querySelectorAll('article.msg.assistant')].at(-1)?.textContent ?? ''));
  await ctxA.setOffline(true);
  await page.waitForTimeout(800);
  await ctxA.setOffline(false);
  await waitIdle(sessionId);
  const afterDrop = await messagesText(sessionId);
  await page.waitForFunction(
    (want) => [...[...document.querySelectorAll('article.msg.assistant')].at(-1).querySelectorAll('.text')].map((e) => e.textContent).join('') === want,
    afterDrop,
  );

  step('approve a tool call from its card');
  await send(page, 'Create the marker. [[script:bash cmd="touch approved.txt"]]');
  const approve = page.getByRole('button', { name: 'Approve', exact: true });
  await approve.waitFor();
  await page.locator('.tool[data-tool-name="Bash"] .badge-approval-requested').waitFor();
  await page.screenshot({ path: join(out, 'approval.png') });
  await approve.click();
  await page.locator('.tool[data-tool-name="Bash"] .badge-output-available').waitFor();
  await page.waitForFunction(() => /Tool finished/.test([...document.querySelectorAll('article.msg.assistant')].at(-1)?.textContent ?? ''));
  await waitIdle(sessionId);

  step('a file write shows in the Diff panel');
  await send(page, 'Write the greeting. [[script:write path=hello.py content="print(\'hello from the console\')"]]');
  await page.getByRole('button', { name: 'Approve', exact: true }).waitFor();
  await page.getByRole('button', { name: 'Approve', exact: true }).click();
  await waitIdle(sessionId);
  await page.getByRole('tab', { name: 'Diff' }).click();
  await page.locator('.change code', { hasText: 'hello.py' }).waitFor();
  await page.locator('.diff .dl-add', { hasText: 'hello from the console' }).waitFor();
  await page.screenshot({ path: join(out, 'conversation-diff.png') });

  step('the Files panel lists, uploads and downloads workspace files');
  await page.getByRole('tab', { name: 'Files' }).click();
  await page.getByRole('button', { name: /^hello\.py/ }).waitFor();
  await page.getByRole('button', { name: /^approved\.txt/ }).waitFor();
  await page.getByLabel('Upload into this folder').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('uploaded from the console\n') });
  await page.getByRole('button', { name: /^notes\.txt/ }).waitFor();
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: /^notes\.txt/ }).click()]);
  check(download.suggestedFilename() === 'notes.txt', `downloaded ${download.suggestedFilename()}`);

  step('the Terminal panel opens the shared shell over the bearer subprotocol');
  await page.getByRole('tab', { name: 'Terminal' }).click();
  await page.getByText('connected').waitFor();
  await page.locator('.xterm-host').click();
  await page.keyboard.type('cat notes.txt; echo "sum=$((6*7))"\n');
  await page.locator('.xterm-rows', { hasText: 'sum=42' }).waitFor();
  check(await page.locator('.xterm-rows', { hasText: 'uploaded from the console' }).count() === 1, 'the uploaded file is in the workspace');
  await page.screenshot({ path: join(out, 'terminal.png') });

  step('interrupt a response');
  await page.getByRole('tab', { name: 'Terminal' }).click();
  await send(page, 'Explain very slowly. [[script:slow chunks=400 delay=100ms]]');
  await page.waitForFunction(() => /Slow chunk 3 of 400/.test([...document.querySelectorAll('article.msg.assistant')].at(-1)?.textContent ?? ''));
  // Esc in the composer interrupts.
  await page.getByRole('textbox', { name: 'Message' }).press('Escape');
  await page.locator('article.msg.assistant').last().getByText('Interrupted').waitFor();
  await waitIdle(sessionId);
  const interrupted = await api('GET', `/sessions/${sessionId}/messages`);
  check(interrupted.messages.at(-1).metadata.outcome === 'cancelled', 'the response ended cancelled');

  step('a child run shows in the Agents tab');
  await send(page, 'Delegate it. [[script:task prompt="Say hi." description="Greeter" final="Delegated."]]');
  for (const end = Date.now() + 90_000; ; ) {
    const approve = page.getByRole('button', { name: 'Approve', exact: true });
    if (await approve.count()) await approve.first().click().catch(() => {});
    const s = await api('GET', `/sessions/${sessionId}`);
    if (s.state === 'READY' && s.current_responses.length === 0 && s.held_inputs.length === 0) break;
    if (Date.now() > end) throw new Error('the delegated response did not end');
    await page.waitForTimeout(250);
  }
  await page.getByRole('tab', { name: 'Agents' }).click();
  await page.locator('.runs li').first().waitFor();
  await page.screenshot({ path: join(out, 'child-runs.png') });
  await page.getByRole('tab', { name: 'Agents' }).click();

  step('two tabs on one conversation stay consistent');
  const second = await ctxA.newPage();
  watch(second, 'second tab');
  second.setDefaultTimeout(60_000);
  await second.goto(page.url());
  await second.getByRole('textbox', { name: 'Message' }).waitFor();
  await send(page, 'From the first tab. [[script:slow chunks=12 delay=80ms text="Seen in both tabs."]]');
  await second.locator('article.msg.user', { hasText: 'From the first tab.' }).waitFor();
  await second.locator('article.msg.assistant', { hasText: 'Seen in both tabs.' }).waitFor();
  await waitIdle(sessionId);
  const sentInFirst = await page.locator('article.msg.user .bubble').allInnerTexts();
  await second.waitForFunction(
    (want) => JSON.stringify([...document.querySelectorAll('article.msg.user .bubble')].map((e) => e.innerText)) === want,
    JSON.stringify(sentInFirst),
  );
  await second.close();

  step('usage, cost and the model are shown with a response');
  await page.locator('.usage', { hasText: /claude-[^ ]+ · [\d,]+ in · [\d,]+ out · \$\d/ }).first().waitFor();

  step('share it and open the shared view in a second browser');
  await page.getByRole('button', { name: 'Share' }).click();
  await page.getByRole('button', { name: 'Create link' }).click();
  const link = await page.getByRole('textbox', { name: 'Share link' }).inputValue();
  check(link.startsWith(`${base}/s/abs_`), `a share link: ${link}`);
  await page.screenshot({ path: join(out, 'share.png') });
  await page.getByRole('button', { name: 'Close' }).click();

  ctxB = await newContext();
  const viewer = ctxB.pages()[0] ?? (await ctxB.newPage());
  watch(viewer, 'viewer');
  viewer.setDefaultTimeout(60_000);
  await viewer.goto(link);
  await viewer.getByText(/Read-only/).waitFor();
  await viewer.getByText('touch approved.txt').first().waitFor();
  check((await viewer.getByRole('textbox', { name: 'Message' }).count()) === 0, 'no composer in the shared view');
  const responses = (await api('GET', `/sessions/${sessionId}/messages`)).messages.filter((m) => m.role === 'assistant').length;
  await viewer.waitForFunction((n) => document.querySelectorAll('article.msg.assistant').length === n, responses);
  await viewer.screenshot({ path: join(out, 'shared.png') });

  step('a revoked link stops working');
  await page.getByRole('button', { name: 'Share' }).click();
  await page.getByRole('button', { name: 'Revoke' }).first().click();
  await page.locator('.shares .badge', { hasText: 'revoked' }).waitFor();
  await page.getByRole('button', { name: 'Close' }).click();
  await viewer.reload();
  await viewer.getByText('This link does not open a conversation').waitFor();

  step('folded work in the history opens on demand');
  await page.reload();
  await page.getByRole('textbox', { name: 'Message' }).waitFor();
  const fold = page.getByRole('button', { name: /^(Show the work|\d+ steps?)/ }).first();
  await fold.click();
  await page.locator('.unfolded').first().waitFor();
  check((await page.locator('.unfolded').first().locator('.tool, .folded, .reasoning, .text').count()) > 0, 'the unfolded block shows its parts');

  step('the conversation list: the title can be renamed from its row');
  await page.locator(`.session-row[data-session-id="${sessionId}"] a`).dblclick();
  const title = page.getByRole('textbox', { name: 'Conversation title' });
  await title.fill('Console end-to-end');
  await title.press('Enter');
  await page.locator(`.session-row[data-session-id="${sessionId}"]`, { hasText: 'Console end-to-end' }).waitFor();
  await page.screenshot({ path: join(out, 'conversation.png') });

  check(errors.length === 0, `no errors in the pages:\n${errors.join('\n')}`);
  step(`passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  for (const ctx of [ctxA, ctxB]) {
    const p = ctx?.pages()[0];
    if (p) await p.screenshot({ path: join(out, `failure-${ctx === ctxA ? 'owner' : 'viewer'}.png`) }).catch(() => {});
  }
  console.error(err);
  // What the owner's conversation showed, to tell a wrong view from a slow one.
  const shown = await ctxA?.pages()[0]?.locator('article.msg').evaluateAll((els) => els.slice(-3).map((e) => e.outerHTML)).catch(() => null);
  if (shown) console.error('the last messages in view:\n' + shown.join('\n'));
  if (errors.length) console.error('page errors:\n' + errors.join('\n'));
  process.exitCode = 1;
} finally {
  await ctxB?.close().catch(() => {});
  await ctxA?.close().catch(() => {});
  for (const d of profiles) rmSync(d, { recursive: true, force: true });
}
