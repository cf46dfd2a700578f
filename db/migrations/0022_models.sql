CREATE TABLE "models" (
	"name" text PRIMARY KEY NOT NULL,
	"provider" text NOT NULL,
	"model" text NOT NULL,
	"base_url" text,
	"api_key_env" text,
	"role" text DEFAULT 'agent' NOT NULL,
	"price_in_per_1m" numeric(12, 6) DEFAULT 0 NOT NULL,
	"price_out_per_1m" numeric(12, 6) DEFAULT 0 NOT NULL,
	"context_window" integer,
	"params" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"tested_at" timestamp with time zone,
	"test" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "models_name_check" CHECK ("name" ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
	CONSTRAINT "models_provider_check" CHECK ("provider" in ('openai', 'anthropic', 'local', 'scripted')),
	CONSTRAINT "models_role_check" CHECK ("role" in ('agent', 'oversight', 'validator', 'emotion', 'novelty', 'task', 'embedder')),
	CONSTRAINT "models_price_check" CHECK ("price_in_per_1m" >= 0 and "price_out_per_1m" >= 0)
);
--> statement-breakpoint
ALTER TABLE "llm_registry" ADD COLUMN "model_name" text;--> statement-breakpoint
ALTER TABLE "llm_registry" ADD CONSTRAINT "llm_registry_model_name_models_name_fk" FOREIGN KEY ("model_name") REFERENCES "public"."models"("name") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "llm_registry_model_name_idx" ON "llm_registry" USING btree ("model_name");