// Real-time page timings through the DevTools protocol (headless Chromium), for bench/mesh.py.
// usage: node --experimental-websocket bench/cdp_timing.js URL [waitMs] [expr]
const { spawn } = require('child_process');
const fs = require('fs');
const url = process.argv[2];
const waitMs = +(process.argv[3] || 4000);
const expr = process.argv[4] || 'JSON.stringify({perf: window.__wanperf, status: document.querySelector("#status").textContent})';
const prof = '/tmp/wanperf-cdp-prof-' + process.pid;
const chrome = spawn('/usr/bin/chromium', ['--headless', '--no-sandbox', '--disable-gpu', '--remote-debugging-port=0',
  '--user-data-dir=' + prof, '--window-size=1400,900', 'about:blank'], { stdio: 'ignore' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  let port;
  for (let i = 0; i < 100 && !port; i++) {
    await sleep(100);
    try { port = fs.readFileSync(prof + '/DevToolsActivePort', 'utf8').split('\n')[0]; } catch (e) {}
  }
  const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  const page = list.find((t) => t.type === 'page');
  const ws = new WebSocket(page.webSocketDebuggerUrl);
  await new Promise((r) => ws.addEventListener('open', r));
  let id = 0; const pending = new Map();
  ws.addEventListener('message', (m) => { const d = JSON.parse(m.data); if (pending.has(d.id)) { pending.get(d.id)(d); pending.delete(d.id); } });
  const call = (method, params = {}) => new Promise((r) => { pending.set(++id, r); ws.send(JSON.stringify({ id, method, params })); });
  await call('Page.enable');
  await call('Page.navigate', { url });
  await sleep(waitMs);
  const steps = expr.trim().startsWith('[') ? JSON.parse(expr) : [expr];
  for (const st of steps) {
    if (typeof st === 'number') { await sleep(st); continue; }
    if (st && st.shot) { // {shot: file, clip: {x, y, width, height}, scale}
      const r = await call('Page.captureScreenshot', { format: 'png', clip: { ...st.clip, scale: st.scale || 2 } });
      fs.writeFileSync(st.shot, Buffer.from(r.result.data, 'base64'));
      continue;
    }
    if (Array.isArray(st)) { // mouse: [type, x, y]
      await call('Input.dispatchMouseEvent', { type: st[0], x: st[1], y: st[2], button: 'left', buttons: st[0] === 'mouseReleased' ? 0 : 1, clickCount: 1 });
      continue;
    }
    const res = await call('Runtime.evaluate', { expression: st, awaitPromise: true, returnByValue: true });
    console.log(res.result && res.result.result ? res.result.result.value : JSON.stringify(res));
  }
  ws.close();
  chrome.kill();
  await sleep(300);
  fs.rmSync(prof, { recursive: true, force: true });
})().catch((e) => { console.error(e); chrome.kill(); process.exit(1); });
