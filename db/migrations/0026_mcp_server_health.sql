ALTER TABLE "mcp_servers" ADD COLUMN "health" text;--> statement-breakpoint
ALTER TABLE "mcp_servers" ADD COLUMN "health_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "mcp_servers" ADD COLUMN "last_error" text;--> statement-breakpoint
ALTER TABLE "mcp_servers" ADD COLUMN "restarts" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "mcp_servers" ADD CONSTRAINT "mcp_servers_health_check" CHECK ("health" in ('up', 'down'));