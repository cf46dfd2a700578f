CREATE TABLE "lifeforce_budgets" (
	"id" text PRIMARY KEY NOT NULL,
	"agent_id" text NOT NULL,
	"scope" text NOT NULL,
	"parent_id" text,
	"capacity" numeric(14, 4),
	"balance" numeric(14, 4),
	"reserved" numeric(14, 4) DEFAULT 0 NOT NULL,
	"spent" numeric(14, 4) DEFAULT 0 NOT NULL,
	"funded" numeric(14, 4) DEFAULT 0 NOT NULL,
	"regen_per_hour" numeric(14, 4) DEFAULT 0 NOT NULL,
	"regen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"daily_limit" numeric(14, 4),
	"daily_window" text DEFAULT '' NOT NULL,
	"daily_used" numeric(14, 4) DEFAULT 0 NOT NULL,
	"monthly_limit" numeric(14, 4),
	"monthly_window" text DEFAULT '' NOT NULL,
	"monthly_used" numeric(14, 4) DEFAULT 0 NOT NULL,
	"priority" integer,
	"on_exhausted" text DEFAULT 'pause' NOT NULL,
	"ask_for" numeric(14, 4) DEFAULT 1000 NOT NULL,
	"exhausted_at" timestamp with time zone,
	"closed_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "lifeforce_budgets_scope_check" CHECK ("scope" in ('agent', 'task', 'campaign', 'fork', 'nerve', 'escalation')),
	CONSTRAINT "lifeforce_budgets_on_exhausted_check" CHECK ("on_exhausted" in ('pause', 'escalate')),
	CONSTRAINT "lifeforce_budgets_nonnegative_check" CHECK ("reserved" >= 0 and "spent" >= 0 and coalesce("balance", 0) >= 0)
);
--> statement-breakpoint
ALTER TABLE "lifeforce_ledger" DROP CONSTRAINT "lifeforce_ledger_scope_check";--> statement-breakpoint
ALTER TABLE "lifeforce_ledger" ADD COLUMN "budget_id" text;--> statement-breakpoint
ALTER TABLE "lifeforce_ledger" ADD COLUMN "deadline" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "lifeforce_budgets" ADD CONSTRAINT "lifeforce_budgets_agent_id_agents_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agents"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "lifeforce_budgets" ADD CONSTRAINT "lifeforce_budgets_parent_id_lifeforce_budgets_id_fk" FOREIGN KEY ("parent_id") REFERENCES "public"."lifeforce_budgets"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "lifeforce_budgets_agent_id_idx" ON "lifeforce_budgets" USING btree ("agent_id");--> statement-breakpoint
CREATE INDEX "lifeforce_budgets_parent_id_idx" ON "lifeforce_budgets" USING btree ("parent_id");--> statement-breakpoint
ALTER TABLE "lifeforce_ledger" ADD CONSTRAINT "lifeforce_ledger_budget_id_lifeforce_budgets_id_fk" FOREIGN KEY ("budget_id") REFERENCES "public"."lifeforce_budgets"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "lifeforce_ledger_budget_id_created_at_idx" ON "lifeforce_ledger" USING btree ("budget_id","created_at");--> statement-breakpoint
ALTER TABLE "lifeforce_ledger" ADD CONSTRAINT "lifeforce_ledger_scope_check" CHECK ("scope" in ('agent', 'task', 'campaign', 'fork', 'nerve', 'escalation'));