-- A new holder of the janitor role; the row follows as a VALUES tuple.
INSERT INTO __DB__.janitor (name, holder, until, ver) VALUES
