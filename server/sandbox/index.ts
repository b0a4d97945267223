import { cardpaySandbox } from './cardpay/index.js';
import { mobilemoneySandbox } from './mobilemoney/index.js';
import { walletpaySandbox } from './walletpay/index.js';
import type { SandboxModule } from './module.js';

/** Every simulator; mounted when SANDBOX is on. */
export const sandboxModules: SandboxModule[] = [
  cardpaySandbox,
  mobilemoneySandbox,
  walletpaySandbox,
];
