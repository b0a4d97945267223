import type { SandboxModule } from './module.js';

/** Every simulator; mounted when SANDBOX is on. */
export const sandboxModules: SandboxModule[] = [];
