import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

/**
 * Debian's `chromium` package (installed by `.ci/run`). Playwright's own browser download is never
 * used: the machine has no network for it. CHROMIUM_PATH overrides the lookup.
 */
function chromiumExecutable(): string {
  const override = process.env.CHROMIUM_PATH;
  if (override) {
    if (existsSync(override)) return override;
    throw new Error(`CHROMIUM_PATH is set to ${override}, which does not exist.`);
  }
  for (const candidate of ['/usr/bin/chromium', '/usr/bin/chromium-browser']) if (existsSync(candidate)) return candidate;
  try {
    const found = execFileSync('sh', ['-c', 'command -v chromium || command -v chromium-browser'], { encoding: 'utf8' }).trim();
    if (found) return found;
  } catch {
    // not on PATH either: fall through to the explanation below
  }
  throw new Error(
    'Chromium is not installed: the browser tests need Debian\'s `chromium` package ' +
      '(`apt-get install -y chromium`, which .ci/run does) or CHROMIUM_PATH pointing at a Chromium binary.',
  );
}

/**
 * A headless Chromium for tests. Without the background-networking flags Chromium keeps trying to
 * reach Google's services, which on a closed network only means a flood of failing connections.
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumExecutable(),
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

const SCREENSHOT_DIR = path.resolve('test-results', 'screenshots');

/** A screenshot at test-results/screenshots/<name>.png (the full page by default), for a person to look at. */
export async function screenshot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: options.fullPage ?? true });
}
