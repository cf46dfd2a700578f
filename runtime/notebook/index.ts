/** The notebook: the web page `npm start` serves (server.ts), its live feed (feed.ts), its guard (guard.ts). */
export {
  defaultNotebookPort,
  notebookApp,
  startNotebook,
  type NotebookDeps,
  type NotebookServer,
  type StartNotebookOptions,
} from './server.js';
export { TickFeed, feedFromBus, feedSink, type FeedEvent } from './feed.js';
export { checkExposure } from './guard.js';
