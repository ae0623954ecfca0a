/**
 * AstraBox approval extension for Pi.
 *
 * Pi has no permission prompts of its own. This extension, installed into every box
 * by the platform and loaded with `-e`, asks the person before a tool that changes
 * the workspace runs (bash, edit, write), through Pi's extension UI request, and
 * passes Pi's abort signal so an interrupt withdraws an open question at once.
 *
 * Permission modes, in this extension's vocabulary:
 *   ask        asks before bash, edit and write (the default)
 *   allow-all  never asks
 * The mode starts from ASTRABOX_PI_PERMISSION_MODE and changes with the command
 * `/astrabox-permission-mode <mode>`, which Pi runs at once even while it works.
 *
 * Each question is a `select` whose title starts "Allow <tool> [<toolCallId>]?"
 * with the options Allow and Deny. When the question ends, the extension reports
 * the outcome as a status line (key "astrabox-approval", text JSON
 * {"toolCallId","decision"} with decision allow, deny or withdrawn), so the
 * platform reads from Pi's own output that an answer took effect.
 *
 * Input ids. The platform sends each input as a prompt whose text starts with
 * "\u2063astrabox-input:<input id>\u2063". The extension takes the marker off before Pi
 * expands or queues the text, and when Pi delivers the message it records the id on the
 * user message itself (field astraboxInputId), so Pi's message_end event and the
 * session file name the input. The model never sees the marker or the field.
 */

const MODES = ["ask", "allow-all"];
const ASKED_TOOLS = ["bash", "edit", "write"];
const STATUS_KEY = "astrabox-approval";
const INPUT_MARK = "\u2063astrabox-input:";
const INPUT_MARK_END = "\u2063";

function userText(message: any): string {
	if (typeof message.content === "string") return message.content;
	if (!Array.isArray(message.content)) return "";
	return message.content.filter((c: any) => c.type === "text").map((c: any) => c.text).join("");
}

function summary(toolName: string, input: any): string {
	if (!input || typeof input !== "object") return "";
	if (toolName === "bash") return String(input.command ?? "");
	return String(input.path ?? input.file_path ?? "");
}

export default function (pi: any) {
	let mode = process.env.ASTRABOX_PI_PERMISSION_MODE || "ask";
	if (!MODES.includes(mode)) mode = "ask";

	pi.registerCommand("astrabox-permission-mode", {
		description: "Set the AstraBox permission mode (ask, allow-all)",
		handler: async (args: string, ctx: any) => {
			const next = String(args ?? "").trim();
			if (!MODES.includes(next)) {
				ctx.ui.setStatus("astrabox-permission-mode", JSON.stringify({ error: `unknown mode ${next}`, mode }));
				return;
			}
			mode = next;
			ctx.ui.setStatus("astrabox-permission-mode", JSON.stringify({ mode }));
		},
	});

	// Inputs taken off their marker, waiting for Pi to deliver them. Pi matches queued
	// messages to deliveries by their text too.
	const waiting: { id: string; text: string }[] = [];

	pi.on("input", async (event: any) => {
		const text = String(event.text ?? "");
		if (!text.startsWith(INPUT_MARK)) return { action: "continue" };
		const end = text.indexOf(INPUT_MARK_END, INPUT_MARK.length);
		if (end < 0) return { action: "continue" };
		const id = text.slice(INPUT_MARK.length, end);
		const clean = text.slice(end + INPUT_MARK_END.length);
		waiting.push({ id, text: clean });
		return { action: "transform", text: clean };
	});

	pi.on("message_end", async (event: any) => {
		const message = event.message;
		if (!message || message.role !== "user" || message.astraboxInputId) return undefined;
		const text = userText(message);
		const i = waiting.findIndex((w) => w.text === text);
		if (i < 0) return undefined;
		const [w] = waiting.splice(i, 1);
		return { message: { ...message, astraboxInputId: w.id } };
	});

	pi.on("tool_call", async (event: any, ctx: any) => {
		if (mode === "allow-all" || !ASKED_TOOLS.includes(event.toolName)) return undefined;
		const title = `Allow ${event.toolName} [${event.toolCallId}]?\n${summary(event.toolName, event.input)}`;
		const choice = await ctx.ui.select(title, ["Allow", "Deny"], { signal: ctx.signal });
		const decision = choice === "Allow" ? "allow" : choice === "Deny" ? "deny" : "withdrawn";
		ctx.ui.setStatus(STATUS_KEY, JSON.stringify({ toolCallId: event.toolCallId, decision }));
		if (decision === "allow") return undefined;
		if (decision === "deny") return { block: true, reason: "Denied by the person" };
		return { block: true, reason: "The approval was withdrawn" };
	});
}
