/*
 * gpufleet dashboard. Everything comes from the daemon's JSON API
 * (/api/v1/...), the same documents the CLI prints with --json. Text from
 * instances is untrusted: it only ever reaches the page as textContent or
 * an attribute set through setAttribute, never as HTML.
 */
"use strict";

/* Which GPUs are idle and whether progress is stale come with each
 * instance of /api/v1/instances ("flags"), judged by the daemon with the
 * user's [status] thresholds, as `gpufleet status` marks them. */
const REFRESH_MS = 10000;
const SVGNS = "http://www.w3.org/2000/svg";

let timer = null;

/* An element with attributes and children (strings become text nodes). */
function el(tag, attrs, ...kids) {
	const e = tag.startsWith("svg:") ?
	    document.createElementNS(SVGNS, tag.slice(4)) :
	    document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {}))
		if (v !== null && v !== undefined && v !== false)
			e.setAttribute(k, String(v));
	for (const k of kids)
		if (k !== null && k !== undefined)
			e.append(k instanceof Node ? k : String(k));
	return e;
}

/*
 * A document of the API; a failure throws with the API's {"error"}. The
 * URL is absolute from location.origin: a page opened as
 * http://user:TOKEN@host/ has the credentials in its base URL, and fetch
 * refuses any URL that carries them (the browser sends them itself).
 */
async function api(path) {
	const r = await fetch(location.origin + "/api/v1/" + path,
	    { headers: { Accept: "application/json" } });
	if (!r.ok) {
		let msg = "HTTP " + r.status;
		try {
			const e = await r.json();
			if (e && typeof e.error === "string") msg = e.error;
		} catch (e) { /* not JSON: the status says it */ }
		throw new Error(path + ": " + msg);
	}
	return r.json();
}

/* Optional documents: a failure shows as "not available", not an error. */
async function maybe(path) {
	try {
		return await api(path);
	} catch (e) {
		return null;
	}
}

function ago(secs) {
	if (secs < 60) return Math.max(0, Math.round(secs)) + "s";
	if (secs < 3600) return Math.round(secs / 60) + "m";
	if (secs < 86400) return Math.round(secs / 3600) + "h";
	return Math.round(secs / 86400) + "d";
}

/* Minor units (minor_per_unit of them to one) as "12.30 CNY". */
function money(minor, per, cur) {
	if (minor === null || minor === undefined) return "?";
	return (minor / per).toFixed(2) + (cur ? " " + cur : "");
}

function gpuCell(g, flags) {
	const u = typeof g.util_gpu === "number" ? g.util_gpu : null;
	const idle = !!(flags && Array.isArray(flags.idle_gpus) &&
	    flags.idle_gpus.includes(g.index));
	const w = u === null ? 0 : Math.min(100, Math.max(0, u));
	return el("div", { class: idle ? "gpu idle" : "gpu",
	    title: g.name || "" },
	    el("span", {}, "#" + g.index),
	    el("span", { class: "bar" }, el("span", { style: null,
		"data-w": w })),
	    el("span", {}, u === null ? "-" : u + "%"),
	    idle ? el("span", { class: "flag" }, "idle") : null);
}

/* The bars' widths: a style attribute set through the CSSOM, which the
 * Content-Security-Policy allows (no inline style sheet). */
function sizeBars(root) {
	for (const s of root.querySelectorAll("[data-w]"))
		s.style.width = s.getAttribute("data-w") + "%";
}

function memCell(gpus) {
	let used = 0, total = 0;
	for (const g of gpus) {
		used += g.mem_used_mib || 0;
		total += g.mem_total_mib || 0;
	}
	if (total === 0) return "-";
	return (used / 1024).toFixed(1) + "/" + (total / 1024).toFixed(0) +
	    " GiB";
}

function progressCell(rep, flags) {
	const p = rep && rep.progress;
	if (!p || typeof p.text !== "string") return el("span", {}, "-");
	const age = (rep.time || 0) - (p.mtime || 0);
	const stale = !!(flags && flags.progress_stale);
	const line = p.text.split("\n")[0];
	return el("span", { class: stale ? "stale" : null },
	    line + " (" + ago(age) + " ago)");
}

/*
 * The soonest stop still to come on this instance: its watcher's
 * deadlines (set by `gpufleet shutdown` and by shutdown schedules alike)
 * that have not fired and were not skipped.
 */
function nextStop(s) {
	const now = Date.now();
	let best = null, bt = 0;
	for (const d of (s.watcher && s.watcher.deadlines) || []) {
		const t = Date.parse(d.at_local);
		if (d.fired_at || d.skipped || !(t > now)) continue;
		if (best === null || t < bt) {
			best = d;
			bt = t;
		}
	}
	if (best === null) return "-";
	return new Date(bt).toISOString().slice(0, 16).replace("T", " ") +
	    "Z (in " + ago((bt - now) / 1000) + ")";
}

/* Cost so far, and what it burns an hour now. */
function costCell(c, per) {
	if (!c) return "-";
	const b = c.burn_per_hour;
	return el("span", {}, money(c.total, per, c.currency),
	    b ? el("div", { class: "muted" }, "+" + money(b, per, "") + "/h") :
	    null);
}

function fleetTable(status, cost) {
	const byName = {};
	const per = cost ? cost.minor_per_unit : 1;
	for (const c of (cost && cost.instances) || [])
		byName[c.name] = c;
	const tb = el("tbody");
	for (const s of status) {
		const rep = s.report || {};
		const gpus = Array.isArray(rep.gpus) ? rep.gpus : [];
		const c = byName[s.name];
		const link = el("a", { href: "#/i/" + encodeURIComponent(s.name) },
		    s.name);
		const w = s.watcher || {};
		const failed = (w.alerts || []).some(a => a.kind === "stop_failed");
		const row = { "data-name": s.name };
		if (failed) row.class = "alert";
		tb.append(el("tr", row,
		    el("td", {}, link),
		    el("td", { class: "state-" + String(s.state).replace(/[^a-z]+/g, "-") }, s.state,
			s.error ? el("div", { class: "muted" }, s.error) : null,
			...(w.stopping || []).map(q => el("div", { class: "stale" },
			    "stopping (unconfirmed, since " + q.since +
			    "): billed as running"))),
		    el("td", {}, String(gpus.length)),
		    el("td", {}, ...gpus.map(g => gpuCell(g, s.flags))),
		    el("td", {}, memCell(gpus)),
		    el("td", { class: "wrap" }, progressCell(rep, s.flags)),
		    el("td", { class: "num" }, costCell(c, per)),
		    el("td", {}, nextStop(s))));
	}
	return el("div", { class: "scroll" }, el("table", { id: "fleet" },
	    el("thead", {}, el("tr", {}, ...["NAME", "STATE", "GPUS", "UTIL",
		"MEMORY", "PROGRESS", "COST", "NEXT STOP"].map(
		h => el("th", {}, h)))), tb));
}

/*
 * The books' alarms, above everything: a stop that failed (the machine
 * still runs and bills), a claim gpufleet rejected (an instance
 * journaled a stop it was never asked for) and a journal flood (entries
 * past the day's caps dropped).
 */
function alertBanner(status) {
	const lines = [];
	for (const s of status)
		for (const a of (s.watcher && s.watcher.alerts) || [])
			if (a.kind === "stop_failed" || a.kind === "claim_rejected")
				lines.push(el("div", {}, s.name + ": " +
				    (a.kind === "stop_failed" ?
					"the stop " + (a.id || "") + " failed at " +
					a.time + ": it still runs and bills" :
					"claimed a stop gpufleet never armed (" +
					(a.id || "") + "): the books are unchanged")));
			else if (a.kind === "journal_flood")
				lines.push(el("div", {}, s.name + ": floods its " +
				    "journal at " + a.time + ": entries past the " +
				    "day's caps were dropped"));
	return lines.length ? el("div", { id: "alerts", class: "banner" },
	    ...lines) : null;
}

function totalsLine(cost) {
	if (!cost) return el("p", { class: "muted" }, "cost: not available");
	const per = cost.minor_per_unit;
	const parts = (cost.totals || []).map(t =>
	    money(t.total, per, t.currency) + " month to date; burning " +
	    money(t.burn_per_hour, per, t.currency) + "/h" +
	    (t.projected_month_end !== undefined ? ", projected " +
		money(t.projected_month_end, per, t.currency) +
		" at month end" : ""));
	return el("p", { id: "totals" }, parts.join("; ") || "no cost yet");
}

/*
 * The top of a chart's axis: the smallest 1, 2 or 5 times a power of ten
 * that is at least v and at least floor (so a near-zero value draws a
 * near-zero bar, not a full one).
 */
function axisTop(v, floor) {
	const m = Math.max(v, floor, Number.MIN_VALUE);
	let p = Math.pow(10, Math.floor(Math.log10(m)));
	for (const k of [1, 2, 5, 10])
		if (k * p >= m * (1 - 1e-9))
			return k * p;
	return 10 * p;
}

/*
 * A bar chart of labelled values, hand-written SVG (no chart library):
 * one column per value, each as high as its value on an axis from 0 to
 * axisTop(the largest, floor). With line ({v, label}), a dashed line
 * across at line.v, labelled.
 */
function barChart(id, rows, fmt, floor, line) {
	const W = 320, H = 140, P = 24;
	const top = axisTop(Math.max(0, ...rows.map(r => r.v),
	    line ? line.v : 0), floor);
	const h = v => (H - 2 * P) * Math.max(0, v) / top;
	const bw = (W - P) / Math.max(1, rows.length);
	const svg = el("svg:svg", { class: "chart", id: id,
	    viewBox: "0 0 " + W + " " + H, role: "img",
	    "data-top": top });
	svg.append(el("svg:line", { class: "axis", x1: P, y1: H - P, x2: W,
	    y2: H - P }));
	rows.forEach((r, i) => {
		const x = P + i * bw;
		svg.append(el("svg:rect", { class: "col", x: x + 1,
		    y: H - P - h(r.v), width: Math.max(1, bw - 2),
		    height: h(r.v), "data-v": r.v },
		    el("svg:title", {}, r.label + ": " + fmt(r.v))));
		if (rows.length <= 12 || i % Math.ceil(rows.length / 8) === 0)
			svg.append(el("svg:text", { x: x + 1, y: H - P + 12 },
			    r.label));
	});
	if (line) {
		const y = H - P - h(line.v);
		svg.append(el("svg:line", { class: "projected", x1: P,
		    y1: y, x2: W, y2: y }, el("svg:title", {}, line.label)));
		svg.append(el("svg:text", { class: "projected", x: W,
		    y: Math.max(10, y - 3), "text-anchor": "end" },
		    line.label));
	}
	svg.append(el("svg:text", { x: 0, y: P }, fmt(top)));
	svg.append(el("svg:text", { x: 0, y: H - P }, "0"));
	return svg;
}

/* A line chart of [t, v] series over [t0, t1], v from 0 to vmax. */
function lineChart(id, series, t0, t1, vmax, unit) {
	const W = 320, H = 140, P = 24;
	const svg = el("svg:svg", { class: "chart", id: id,
	    viewBox: "0 0 " + W + " " + H, role: "img" });
	const x = t => P + (W - P) * (t - t0) / Math.max(1, t1 - t0);
	const y = v => H - P - (H - 2 * P) * Math.min(v, vmax) / vmax;
	svg.append(el("svg:line", { class: "axis", x1: P, y1: H - P, x2: W,
	    y2: H - P }));
	svg.append(el("svg:text", { x: 0, y: P }, vmax + unit));
	svg.append(el("svg:text", { x: P, y: H - 6 },
	    new Date(t0 * 1000).toISOString().slice(5, 16).replace("T", " ")));
	series.forEach((pts, k) => {
		if (pts.length === 0) return;
		const d = pts.map((p, i) => (i ? "L" : "M") +
		    x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
		svg.append(el("svg:path", { class: k ? "line2" : "line",
		    d: d }));
	});
	return svg;
}

function card(title, ...body) {
	return el("div", { class: "card" }, el("h3", {}, title), ...body);
}

/*
 * The month-end projection of t (an element of cost's "totals"): a line
 * under the cost-by-day chart, or null when the API has none.
 */
function projection(t, per) {
	if (!t || t.projected_month_end === undefined ||
	    t.projected_month_end === null)
		return null;
	return el("p", { id: "projection", class: "muted" },
	    "projected " + money(t.projected_month_end, per, t.currency) +
	    " at month end (" + money(t.total, per, t.currency) +
	    " so far; a day at the current burn: " +
	    money(24 * (t.burn_per_hour || 0), per, t.currency) + ")");
}

function costCharts(cost, days) {
	const per = cost ? cost.minor_per_unit : 1;
	const tot = cost && cost.totals && cost.totals[0] ? cost.totals[0] :
	    null;
	const cur = tot ? tot.currency : "";
	const fmt = v => money(v, per, cur);
	/* The axis reaches at least the smallest amount shown (0.01). */
	const floor = per / 100;
	const prov = {};
	for (const c of (cost && cost.instances) || [])
		if (c.currency === cur && c.total !== null)
			prov[c.provider || "-"] =
			    (prov[c.provider || "-"] || 0) + c.total;
	const byDay = (days || []).map(d => {
		const t = (d.cost && d.cost.totals || []).find(x =>
		    x.currency === cur);
		return { label: d.day.slice(5), v: t && t.total || 0 };
	});
	const burnDay = tot && tot.burn_per_hour ?
	    { v: 24 * tot.burn_per_hour,
		label: fmt(24 * tot.burn_per_hour) + "/day now" } : null;
	return el("div", { class: "cards" },
	    card("Cost by day" + (cur ? " (" + cur + ")" : ""),
		byDay.length ? barChart("cost-day", byDay, fmt, floor,
		burnDay) : el("p", { class: "muted" }, "not available"),
		projection(tot, per)),
	    card("Cost by provider" + (cur ? " (" + cur + ")" : ""),
		Object.keys(prov).length ? barChart("cost-provider",
		Object.entries(prov).map(([k, v]) => ({ label: k, v: v })),
		fmt, floor, null) :
		el("p", { class: "muted" }, "no priced instance")));
}

function scheduleTable(schedules) {
	if (!schedules) return el("p", { class: "muted" }, "not available");
	return el("div", { class: "scroll" }, el("table", { id: "schedules" },
	    el("thead", {}, el("tr", {}, ...["NAME", "SELECTOR", "CRON",
		"ACTION", "NEXT"].map(h => el("th", {}, h)))),
	    el("tbody", {}, ...schedules.map(s => el("tr", {},
		el("td", {}, s.name), el("td", {}, s.selector),
		el("td", {}, s.cron), el("td", {}, s.action),
		el("td", {}, s.paused ? "paused" : s.next_run || "-"))))));
}

/* A duration as the CLI writes it: 45s, 30m, 2h05m, 3d04h. */
function duration(secs) {
	const s = Math.max(0, Math.floor(secs || 0));
	const two = n => String(n).padStart(2, "0");
	if (s < 60) return s + "s";
	if (s < 3600) return Math.floor(s / 60) + "m";
	if (s < 86400)
		return Math.floor(s / 3600) + "h" + two(Math.floor(s % 3600 / 60)) +
		    "m";
	return Math.floor(s / 86400) + "d" + two(Math.floor(s % 86400 / 3600)) +
	    "h";
}

/* An autostop policy in one line, as `gpufleet shutdown ls` shows it. */
function autostopLine(a) {
	const wait = Array.isArray(a.wait_for) && a.wait_for.length ?
	    a.wait_for.join(",") : "none";
	return "autostop " + (a.id || "?") + ": idle " + duration(a.idle_s) +
	    " (GPUs below " + (a.gpu_below || 0) + "%, wait for " + wait +
	    (a.stalled_s > 0 ? ", stalled " + duration(a.stalled_s) : "") +
	    (a.max_runtime_s > 0 ? ", max runtime " +
		duration(a.max_runtime_s) : "") + ")";
}

function autostopList(status) {
	const rows = status.filter(s => s.watcher &&
	    s.watcher.autostop && typeof s.watcher.autostop === "object");
	if (rows.length === 0)
		return el("p", { class: "muted" }, "no autostop policy");
	return el("ul", { id: "autostop" }, ...rows.map(s => el("li",
	    { "data-name": s.name }, s.name + ": " +
	    autostopLine(s.watcher.autostop))));
}

function eventsTable(events) {
	if (!events) return el("p", { class: "muted" }, "not available");
	const last = events.slice(-50).reverse();
	return el("div", { class: "scroll" }, el("table", { id: "events" },
	    el("thead", {}, el("tr", {}, ...["TIME", "WHERE", "EVENT",
		"DETAIL"].map(h => el("th", {}, h)))),
	    el("tbody", {}, ...last.map(e => el("tr", {},
		el("td", {}, e.time),
		el("td", {}, e.source === "watcher" ? e.instance :
		    (e.instances || []).join(" ") || "gpufleet"),
		el("td", {}, e.event),
		el("td", { class: "wrap" }, e.why || e.id || ""))))));
}

/*
 * Cost by day: `cost --json` (the API's /cost) has no days of its own, so
 * one window per day of the last DAYS, UTC dates, fetched again at most
 * every DAYS_MS (each is a run of the CLI on the daemon's side, which
 * runs a few at once).
 */
const DAYS = 7;
const DAYS_MS = 300000;
let daysCache = null, daysAt = 0;

async function costDays() {
	if (daysCache !== null && Date.now() - daysAt < DAYS_MS)
		return daysCache;
	const day = t => new Date(t).toISOString().slice(0, 10);
	const now = Date.now(), list = [];
	for (let i = DAYS - 1; i >= 0; i--)
		list.push([day(now - i * 86400000),
		    day(now - (i - 1) * 86400000)]);
	/* One after the other: the daemon runs a few commands at once. */
	const docs = [];
	for (const [a, b] of list) {
		const d = await maybe("cost?since=" + a + "&until=" + b);
		if (d === null)
			return daysCache;
		docs.push(d);
	}
	daysCache = list.map(([a], i) => ({ day: a, cost: docs[i] }));
	daysAt = Date.now();
	return daysCache;
}

async function fleetPage() {
	const [status, cost, days, schedules, events] = await Promise.all([
	    api("instances"), maybe("cost"), costDays(),
	    maybe("schedules"), maybe("events?limit=50")]);
	return [alertBanner(status), el("h2", {}, "Fleet"),
	    fleetTable(status, cost),
	    el("h2", {}, "Cost"), totalsLine(cost), costCharts(cost, days),
	    el("h2", {}, "Schedules"), scheduleTable(schedules),
	    el("h2", {}, "Autostop"), autostopList(status),
	    el("h2", {}, "Events"), eventsTable(events)];
}

/*
 * An instance's page, #/i/NAME (24 h) or #/i/NAME/7d: the range is in
 * the address, so a link or a reload keeps it.
 */
async function instancePage(name, range) {
	const secs = range === "7d" ? 7 * 86400 : 86400;
	const enc = encodeURIComponent(name);
	const [doc, hist] = await Promise.all([api("instances/" + enc),
	    api("history/" + enc + "?since=-" + range)]);
	const now = Date.now() / 1000;
	const util = {}, mem = {};
	for (const p of hist.points || []) {
		const t = Date.parse(p.t) / 1000;
		(util[p.gpu] = util[p.gpu] || []).push([t, p.util_mean || 0]);
		if (p.mem_total)
			(mem[p.gpu] = mem[p.gpu] || []).push([t,
			    100 * (p.mem_mean || 0) / p.mem_total]);
	}
	const tabs = el("div", { class: "tabs" }, ...["24h", "7d"].map(r => {
		const b = el("button", { type: "button",
		    "aria-pressed": r === range }, r);
		b.addEventListener("click", () => {
			location.hash = "#/i/" + enc + "/" + r;
		});
		return b;
	}));
	const gpus = Object.keys(util);
	return [el("h2", {}, name), tabs,
	    el("div", { class: "cards", id: "charts", "data-range": range },
		card("GPU utilization (%)", gpus.length ?
		    lineChart("chart-util", gpus.map(g => util[g]),
		    now - secs, now, 100, "%") :
		    el("p", { class: "muted" }, "no history yet")),
		card("GPU memory (% used)", Object.keys(mem).length ?
		    lineChart("chart-mem", Object.keys(mem).map(g => mem[g]),
		    now - secs, now, 100, "%") :
		    el("p", { class: "muted" }, "no history yet"))),
	    el("h2", {}, "Details"),
	    el("pre", { id: "show" }, JSON.stringify(doc, null, 2))];
}

async function refresh() {
	clearTimeout(timer);
	const m = /^#\/i\/([^/]+)(?:\/(24h|7d))?$/.exec(location.hash);
	const err = document.getElementById("error");
	try {
		const kids = m ? await instancePage(decodeURIComponent(m[1]),
		    m[2] || "24h") :
		    await fleetPage();
		const main = document.getElementById("main");
		main.replaceChildren(...kids.filter(k => k !== null));
		sizeBars(main);
		err.hidden = true;
		document.getElementById("updated").textContent = "updated " +
		    new Date().toTimeString().slice(0, 8);
	} catch (e) {
		err.textContent = String(e.message || e);
		err.hidden = false;
	}
	timer = setTimeout(refresh, REFRESH_MS);
}

window.addEventListener("hashchange", refresh);
document.addEventListener("DOMContentLoaded", refresh);
