ALTER TABLE "forks" ADD COLUMN "ready_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "forks" ADD COLUMN "gate" text;--> statement-breakpoint
ALTER TABLE "forks" ADD COLUMN "gate_by" text;--> statement-breakpoint
ALTER TABLE "forks" ADD COLUMN "gate_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "forks" ADD CONSTRAINT "forks_gate_check" CHECK ("gate" in ('pending', 'approved', 'rejected', 'expired'));