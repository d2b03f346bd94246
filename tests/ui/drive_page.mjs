// Drives Debian's chromium (headless, through playwright-core) for test_status_page_browser.py and
// test_docs_browser.py. Usage: node drive_page.mjs CHROMIUM USER_DATA_DIR. Reads one JSON command
// per line on stdin ({"op": "page", "url": ...}, {"op": "batch", "url": ...}, {"op": "visit",
// "url": ...}, {"op": "screenshot", "path": ...}, {"op": "quit"}) and answers each with one JSON line on stdout, so the test can read ZooKeeper
// and the broker right before and after each page load.
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [executablePath, userDataDir] = process.argv.slice(2);
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  headless: true,
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
  viewport: { width: 1280, height: 900 },
});
const page = context.pages()[0] ?? (await context.newPage());
const requests = [];
page.on("request", (request) => requests.push(request.url()));

const texts = (locator) => locator.evaluateAll((cells) => cells.map((c) => c.textContent.trim()));

async function readStreamingPage(url) {
  requests.length = 0;
  await page.goto(url, { waitUntil: "load" });
  const timelines = {};
  for (const chart of ["input-rate", "scheduling-delay", "processing-time", "total-delay"]) {
    timelines[chart] = await page
      .locator(`svg#timeline-${chart} circle.point`)
      .evaluateAll((points) => points.map((p) => Number(p.dataset.batchTime)));
  }
  const receivers = await page.locator("#receivers tbody tr[data-stream-id]").evaluateAll((rows) =>
    rows.map((row) => ({
      name: row.querySelector(".receiver-name").textContent.trim(),
      status: row.querySelector(".receiver-status").textContent.trim(),
      executor: row.querySelector(".receiver-executor").textContent.trim(),
      host: row.querySelector(".receiver-host").textContent.trim(),
    })),
  );
  const number = (text) => (text === "-" ? null : Number(text.replaceAll(",", "")));
  const partitions = await page.locator("#partitions tbody tr[data-topic]").evaluateAll((rows) =>
    rows.map((row) => ({
      topic: row.dataset.topic,
      partition: Number(row.dataset.partition),
      committed: row.querySelector("[data-field=committed]").textContent.trim(),
      log_end: row.querySelector("[data-field=log-end]").textContent.trim(),
      lag: row.querySelector("[data-field=lag]").textContent.trim(),
      owner: row.querySelector(".owner").textContent.trim(),
    })),
  );
  for (const row of partitions) {
    for (const field of ["committed", "log_end", "lag"]) row[field] = number(row[field]);
  }
  const completed = await page.locator("#completed-batches tbody tr[data-batch-time]").evaluateAll((rows) =>
    rows.map((row) => ({
      batch_time: Number(row.dataset.batchTime),
      records: Number(row.children[1].textContent.replaceAll(",", "")),
      href: row.querySelector("a").getAttribute("href"),
    })),
  );
  return {
    timelines,
    receivers,
    partitions,
    completed,
    batches_completed: Number(await page.locator("#summary-batches-completed").textContent()),
    requests: [...requests],
  };
}

async function readBatchPage(url) {
  requests.length = 0;
  await page.goto(url, { waitUntil: "load" });
  const ranges = await page.locator("#offset-ranges tbody tr[data-topic]").evaluateAll((rows) =>
    rows.map((row) => ({
      topic: row.dataset.topic,
      partition: Number(row.dataset.partition),
      from: Number(row.querySelector("[data-field=from]").textContent.replaceAll(",", "")),
      until: Number(row.querySelector("[data-field=until]").textContent.replaceAll(",", "")),
    })),
  );
  const operations = await texts(page.locator("#output-operations tbody tr[data-op-id] td:nth-child(5)"));
  return { ranges, operations, requests: [...requests] };
}

// Any page: its title and headings, the images that did not load, and every request it made.
async function visitPage(url) {
  requests.length = 0;
  const response = await page.goto(url, { waitUntil: "load" });
  const headings = await texts(page.locator("article h1, article h2"));
  const brokenImages = await page
    .locator("article img")
    .evaluateAll((images) => images.filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.src));
  return { status: response.status(), title: await page.title(), headings, brokenImages, requests: [...requests] };
}

console.log(JSON.stringify({ ready: true }));
for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  let answer;
  try {
    if (command.op === "page") answer = await readStreamingPage(command.url);
    else if (command.op === "batch") answer = await readBatchPage(command.url);
    else if (command.op === "visit") answer = await visitPage(command.url);
    else if (command.op === "screenshot") {
      await page.screenshot({ path: command.path, fullPage: true });
      answer = { saved: command.path };
    } else if (command.op === "quit") break;
    else answer = { error: `unknown op ${command.op}` };
  } catch (error) {
    answer = { error: String(error) };
  }
  console.log(JSON.stringify(answer));
}
await context.close();
