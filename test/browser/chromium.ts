import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

/**
 * Which Chromium the browser tests drive: CHROMIUM_PATH when set, else a system Chromium on PATH,
 * else the one inside the `@sparticuz/chromium` npm package (a dev dependency: `npm install` alone
 * is enough). Playwright's own browser download is never used: the machine has no network for it.
 */
export type ChromiumSource = 'CHROMIUM_PATH' | 'system' | '@sparticuz/chromium';

interface Resolved {
  source: ChromiumSource;
  executablePath: string;
  args: string[];
}

/**
 * Without the background-networking flags Chromium keeps trying to reach Google's services, which on
 * a closed network only means a flood of failing connections.
 */
const QUIET_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function systemChromium(): string | null {
  try {
    const found = execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim();
    return found || null;
  } catch {
    return null;
  }
}

export async function resolveChromium(): Promise<Resolved> {
  const override = process.env.CHROMIUM_PATH;
  if (override) {
    if (!existsSync(override)) throw new Error(`CHROMIUM_PATH is set to ${override}, which does not exist.`);
    return { source: 'CHROMIUM_PATH', executablePath: override, args: QUIET_ARGS };
  }
  const system = systemChromium();
  if (system) return { source: 'system', executablePath: system, args: QUIET_ARGS };
  // The package unpacks its brotli-compressed binary into the temp directory once (~2 s) and reuses it.
  const { default: packaged } = await import('@sparticuz/chromium');
  const executablePath = await whileHoldingUnpackLock(() => packaged.executablePath());
  return { source: '@sparticuz/chromium', executablePath, args: [...packaged.args, ...QUIET_ARGS.filter((a) => !packaged.args.includes(a))] };
}

/**
 * The package takes an existing `<tmp>/chromium` as unpacked, so a second test process that starts while
 * the first is still writing it would launch a half-written file (ETXTBSY). The unpack is therefore done
 * by one process at a time: a directory as the lock (mkdir is atomic), taken over when older than 2 min
 * (its holder died).
 */
async function whileHoldingUnpackLock<T>(unpack: () => Promise<T>): Promise<T> {
  const lock = path.join(os.tmpdir(), 'chromium-unpack.lock');
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 120_000) rmSync(lock, { recursive: true, force: true });
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  try {
    return await unpack();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** A headless Chromium for tests. */
export async function launchChromium(): Promise<Browser> {
  const { executablePath, args } = await resolveChromium();
  return chromium.launch({ executablePath, headless: true, args });
}

const SCREENSHOT_DIR = path.resolve('test-results', 'screenshots');

/** A screenshot at test-results/screenshots/<name>.png (the full page by default), for a person to look at. */
export async function screenshot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: options.fullPage ?? true });
}
