/**
 * An agent budget's operator settings, apart from core/lifeforce.ts (which re-exports them): the
 * agent loop parses them in its input, and importing the ledger's arithmetic for that would make
 * every open agent loop evaluate its price table and schemas too (see workflows/index.ts).
 */
import { z } from 'zod';
import { sharedValue } from './shared.js';

export const exhaustedPolicies = ['pause', 'escalate'] as const;
export type ExhaustedPolicy = (typeof exhaustedPolicies)[number];

/**
 * An agent budget's operator settings (the agent loop's input on its first start, `mindloop
 * lifeforce set`): never the agent's own config, so an agent cannot grant itself lifeforce.
 */
export const budgetSettingsSchema = sharedValue('core/lifeforce-settings/budgetSettings', () =>
  z.strictObject({
    /** The budget's size; null = unlimited (spend is still recorded). */
    capacity: z.number().min(0).nullable().optional(),
    regenPerHour: z.number().min(0).optional(),
    dailyLimit: z.number().min(0).nullable().optional(),
    monthlyLimit: z.number().min(0).nullable().optional(),
    /** When a reservation is refused: wait for regeneration or a grant (`pause`), or ask a human for more (`escalate`). */
    onExhausted: z.enum(exhaustedPolicies).optional(),
    /** The grant an escalation asks for. */
    askFor: z.number().positive().optional(),
    /** Explicit task priority 1 (first) … 5; null = from the lifeforce left. */
    priority: z.number().int().min(1).max(5).nullable().optional(),
  }),
);
export type BudgetSettingsInput = z.input<typeof budgetSettingsSchema>;
