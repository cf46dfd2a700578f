#!/usr/bin/env node
// The `mindloop` CLI: TypeScript sources run through tsx's loader, no build step.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
