/**
 * `speak`: the command only asks. The agent loop starts the speech workflow
 * `speech/<agentId>/<tick>/<cmdId>` as an abandoned child; it holds the lifeforce, has the
 * engine say the text and writes the outcome back onto this command's log row.
 */
import { clipText } from '../../core/sanitize.js';
import { workflowIds } from '../../core/ids.js';
import type { HandlerMap } from './shared.js';

export const speechHandlers: HandlerMap<'speak'> = {
  async speak({ agentId, tick, logCmdId }, a) {
    return {
      message: clipText(
        `speaking ${a.text.length} characters${a.lang ? ` in ${a.lang}` : ''} as ${workflowIds.speech(agentId, tick, logCmdId)}; the outcome comes in a later context`,
        200,
      ),
      effects: [{ kind: 'speak', text: a.text, ...(a.lang ? { lang: a.lang } : {}), cmdId: logCmdId }],
    };
  },
};
