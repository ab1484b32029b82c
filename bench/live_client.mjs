// Many live-page subscribers in one Node.js process, for bench/bench_live.py.
//
//     node bench/live_client.mjs CONFIG.json
//
// CONFIG: {"subs": [{"urls": [...], "verify": bool}], "cookie", "origin", "wave", "ackEvery",
//          "ackMs", "out"}. Each subscriber behaves like static/workbench/live.js: connects with
// ?last_seq, checks that updates are contiguous (else asks for a resync), acks them cumulatively
// (every `ackEvery` updates or `ackMs` after the last one), and reconnects with its seq when
// dropped (to the next URL when its server refuses). "verify" subscribers also check the rows'
// data-seq inside the HTML.
//
// stdout: "connected N SECONDS" once every subscriber had its hello (connected in waves of `wave`).
// stdin:  "wait LAST SECONDS": wait until every subscriber shows LAST (or SECONDS pass), close all,
//         write CONFIG.out (per subscriber: updates [from, last, received, sent_at], reconnects,
//         gaps, bytes, urlIndex) and print "done".
// The `ws` package comes from var/bench/node (bench_live.py installs it there).

import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";

const require = createRequire(process.env.LIVE_CLIENT_NODE_MODULES + "/");
const WebSocket = require("ws");

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const HEAD = /^\{"type":"update","from_seq":(\d+),"last_seq":(\d+),"status":(?:"[^"]*"|null),"sent_at":([\d.]+),/;
const SEQ = /data-seq=\\?"(\d+)\\?"/g;
const now = () => (performance.timeOrigin + performance.now()) / 1000;

class Subscriber {
  constructor(spec) {
    this.urls = spec.urls;
    this.verify = spec.verify;
    this.urlIndex = 0;
    this.lastSeq = 0;
    this.updates = [];
    this.reconnects = 0;
    this.gaps = 0;
    this.bytes = 0;
    this.unacked = 0;
    this.ackTimer = null;
    this.done = false;
    this.ws = null;
    this.connected = null;
    this.hello = new Promise((resolve) => (this.connected = resolve));
  }

  ack() {
    if (this.ackTimer) clearTimeout(this.ackTimer);
    this.ackTimer = null;
    this.unacked = 0;
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(`{"type":"ack","seq":${this.lastSeq}}`);
  }

  connect() {
    if (this.done) return;
    const ws = new WebSocket(`${this.urls[this.urlIndex]}?last_seq=${this.lastSeq}`, {
      origin: config.origin,
      headers: { Cookie: config.cookie },
      perMessageDeflate: false,
      handshakeTimeout: 30000,
      maxPayload: 0,
    });
    this.ws = ws;
    let refused = false;
    ws.on("message", (data) => this.onMessage(ws, data));
    ws.on("error", (err) => {
      if (err && (err.code === "ECONNREFUSED" || err.code === "ECONNRESET")) refused = true;
    });
    ws.on("close", () => {
      if (this.ackTimer) clearTimeout(this.ackTimer);
      this.ackTimer = null;
      this.unacked = 0;
      if (this.done) return;
      if (refused) this.urlIndex = (this.urlIndex + 1) % this.urls.length;
      this.reconnects++;
      setTimeout(() => this.connect(), 50);
    });
  }

  onMessage(ws, data) {
    const received = now();
    this.bytes += data.length;
    const text = data.toString();
    const head = HEAD.exec(text.slice(0, 200));
    if (head === null) {
      const message = JSON.parse(text);
      if (message.type === "hello") {
        if (message.from_seq !== this.lastSeq) this.gaps++;
        this.connected();
      }
      return;
    }
    const from = Number(head[1]);
    const last = Number(head[2]);
    if (from !== this.lastSeq) {
      this.gaps++;
      ws.send(`{"type":"resync","after_seq":${this.lastSeq}}`);
      return;
    }
    if (this.verify) {
      const html = JSON.parse(text).html;
      const seqs = [...html.matchAll(SEQ)].map((m) => Number(m[1]));
      let ok = seqs.length === last - from;
      for (let i = 0; ok && i < seqs.length; i++) ok = seqs[i] === from + 1 + i;
      if (!ok) this.gaps++;
    }
    this.updates.push([from, last, received, Number(head[3])]);
    this.lastSeq = last;
    if (++this.unacked >= config.ackEvery) this.ack();
    else if (!this.ackTimer) this.ackTimer = setTimeout(() => this.ack(), config.ackMs);
  }

  close() {
    this.done = true;
    if (this.ackTimer) clearTimeout(this.ackTimer);
    if (this.ws) this.ws.terminate();
  }
}

const subs = config.subs.map((spec) => new Subscriber(spec));

async function main() {
  const started = now();
  for (let i = 0; i < subs.length; i += config.wave) {
    const wave = subs.slice(i, i + config.wave);
    wave.forEach((s) => s.connect());
    await Promise.all(wave.map((s) => s.hello));
  }
  const cpuAtConnected = process.cpuUsage();
  process.stdout.write(`connected ${subs.length} ${(now() - started).toFixed(2)}\n`);
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [command, lastRaw, secondsRaw] = line.trim().split(" ");
    if (command !== "wait") continue;
    const last = Number(lastRaw);
    const deadline = now() + Number(secondsRaw);
    while (now() < deadline && subs.some((s) => s.lastSeq < last)) await new Promise((r) => setTimeout(r, 100));
    const cpu = process.cpuUsage(cpuAtConnected);
    subs.forEach((s) => s.close());
    const out = {
      cpu_seconds: (cpu.user + cpu.system) / 1e6,
      subs: subs.map((s) => ({
        updates: s.updates,
        reconnects: s.reconnects,
        gaps: s.gaps,
        bytes: s.bytes,
        url_index: s.urlIndex,
        last_seq: s.lastSeq,
      })),
    };
    writeFileSync(config.out, JSON.stringify(out));
    process.stdout.write("done\n");
    break;
  }
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + "\n");
  process.exit(1);
});
