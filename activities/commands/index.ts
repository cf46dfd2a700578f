/**
 * One handler per catalogue command type. The map's type makes a missing handler a compile
 * error when the catalogue grows.
 */
import type { CommandType } from '../../core/catalogue.js';
import { goalHandlers, llmTaskHandlers, taskHandlers } from './goals.js';
import { configHandlers, cycleHandlers, helpHandlers } from './loop.js';
import {
  abstractHandlers,
  conceptHandlers,
  diaryHandlers,
  linkHandlers,
  llmMemoryHandlers,
  memoryHandlers,
} from './memory.js';
import { noteHandlers } from './notes.js';
import { processHandlers } from './processes.js';
import { shellHandlers } from './shell.js';
import { speechHandlers } from './speech.js';
import { spawnHandlers } from './spawn.js';
import { toolHandlers } from './tools.js';
import { nerveHandlers } from './nerves.js';
import { escalationHandlers } from './escalations.js';
import { factHandlers, withFactResolution } from './facts.js';
import { identityHandlers, peerHandlers, reputationHandlers } from './peers.js';
import { stagnationStrategyHandlers, tagHandlers, thinkingMethodHandlers } from './methods.js';
import { askHandlers, registryHandlers } from './registry.js';
import type { HandlerMap } from './shared.js';

export const handlers: HandlerMap<CommandType> = {
  ...helpHandlers,
  ...nerveHandlers,
  ...diaryHandlers,
  ...conceptHandlers,
  ...linkHandlers,
  ...goalHandlers,
  ...taskHandlers,
  // Setting a fact-check task done/failed resolves its pending fact (activities/commands/facts.ts).
  'tasks.status': withFactResolution(taskHandlers['tasks.status']),
  ...factHandlers,
  ...noteHandlers,
  ...llmMemoryHandlers,
  ...memoryHandlers,
  ...configHandlers,
  ...cycleHandlers,
  ...abstractHandlers,
  ...llmTaskHandlers,
  ...processHandlers,
  ...shellHandlers,
  ...speechHandlers,
  ...spawnHandlers,
  ...escalationHandlers,
  ...toolHandlers,
  ...askHandlers,
  ...peerHandlers,
  ...reputationHandlers,
  ...identityHandlers,
  ...tagHandlers,
  ...registryHandlers,
  ...thinkingMethodHandlers,
  ...stagnationStrategyHandlers,
};

export { CommandError, type HandlerContext, type HandlerResult, type Tx } from './shared.js';
