-- Forgets the marks at or before @cutoff: a purge bounds its walk by the
-- first mark after its cutoff, and cutoffs only move on.
DELETE FROM ferry_seq_marks WHERE at <= @cutoff
