-- Replies recorded before `reflection` held the summary of their ideas carry the model's name
-- (`provider:model`) there: give them the summary their `ideas` hold (null when none), written as
-- the reflexes write it ("new: …; … · refined: … · discarded: …", at most 1 000 characters).
WITH summaries AS (
	SELECT r.id, nullif(concat_ws(' · ',
		(SELECT 'new: ' || string_agg(x, '; ') FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(r.ideas->'new') = 'array' THEN r.ideas->'new' ELSE '[]'::jsonb END) x),
		(SELECT 'refined: ' || string_agg(x, '; ') FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(r.ideas->'refined') = 'array' THEN r.ideas->'refined' ELSE '[]'::jsonb END) x),
		(SELECT 'discarded: ' || string_agg(x, '; ') FROM jsonb_array_elements_text(CASE WHEN jsonb_typeof(r.ideas->'discarded') = 'array' THEN r.ideas->'discarded' ELSE '[]'::jsonb END) x)
	), '') AS text
	FROM llm_recent_responses r
	WHERE r.reflection ~ '^(openai|anthropic|local|scripted):\S*$'
)
UPDATE llm_recent_responses r
SET reflection = CASE WHEN length(s.text) > 1000 THEN left(s.text, 999) || '…' ELSE s.text END
FROM summaries s
WHERE r.id = s.id;
