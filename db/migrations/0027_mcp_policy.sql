ALTER TABLE "mcp_servers" ADD COLUMN "policy" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "mcp_servers" ADD COLUMN "sandbox" jsonb;--> statement-breakpoint
ALTER TABLE "mcp_tools" ADD COLUMN "discovered_at" timestamp with time zone;--> statement-breakpoint
UPDATE "mcp_tools" SET "discovered_at" = "created_at";