-- reserved: migration 6 belongs to the governance branch (retention, review, revoke)
-- Placeholder so that this branch's migration 7 applies in a 1..N sequence. Replaced by the
-- governance branch's 0006 file when both are merged (delete this file then).
SELECT 1;
