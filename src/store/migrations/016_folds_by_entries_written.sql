-- compatible-from: 12
--
-- A fold at the commit of one entry written in 512, where it was one change in 512. A statement
-- that moves an entry from one list to another (a status change, another staff member) writes two
-- changes, its -1 and its +1, and so ran a fold at its commit twice as often as a statement that
-- writes one: at one run in 256, often enough to be a one-row status change's 99th percentile.
-- Now each entry a statement writes takes one turn from `list_turns`, the change that holds a
-- multiple of 512 is marked `fold`, and that change's commit folds its list (docs/design/lists.md).

-- Turns are numbers, not rows: a sequence hands them out without a lock that writers share.
CREATE SEQUENCE list_turns;
GRANT USAGE ON SEQUENCE list_turns TO openbook_writer;

ALTER TABLE list_changes ADD COLUMN fold boolean NOT NULL DEFAULT false;

DROP TRIGGER list_fold_at_commit ON list_changes;
CREATE CONSTRAINT TRIGGER list_fold_at_commit AFTER INSERT ON list_changes
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.fold)
  EXECUTE FUNCTION list_fold_at_commit();

-- The list's change trigger function as 015 wrote it, the writer's changes taking turns.
CREATE OR REPLACE FUNCTION list_install(p_list text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
  d list_definitions;
  v_function text := 'list_changes_of_' || p_list;
  v_entry text;
BEGIN
  SELECT * INTO STRICT d FROM list_definitions WHERE list = p_list;
  v_entry := format('r.org_id, %L, r.%I, r.id, %s', p_list, d.at_column, list_attrs_sql(p_list, 'r'));
  EXECUTE format($f$
    CREATE OR REPLACE FUNCTION public.%1$I() RETURNS trigger
    LANGUAGE plpgsql AS $body$
    DECLARE
      v_orgs text[];
      v_built text[];
    BEGIN
      IF current_setting('openbook.fold', true) = 'now' THEN
        -- openbook's own bulk loads: the statement's entries go straight into the buckets of the
        -- organizations whose list has them (v_built); the others' lists are counted at the end.
        IF TG_OP = 'INSERT' THEN
          v_orgs := ARRAY(SELECT DISTINCT r.org_id FROM new_rows r WHERE r.is_active);
        ELSIF TG_OP = 'DELETE' THEN
          v_orgs := ARRAY(SELECT DISTINCT r.org_id FROM old_rows r WHERE r.is_active);
        ELSE
          v_orgs := ARRAY(SELECT r.org_id FROM old_rows r WHERE r.is_active UNION SELECT r.org_id FROM new_rows r WHERE r.is_active);
        END IF;
        v_built := ARRAY(SELECT o FROM unnest(v_orgs) o
          WHERE EXISTS (SELECT FROM public.buckets b WHERE b.org_id = o AND b.list = %3$L));
        PERFORM public.list_fold_entries(o, %3$L, NULL, NULL, NULL, NULL) FROM unnest(v_orgs) o WHERE o <> ALL (v_built);
        IF TG_OP = 'INSERT' THEN
          PERFORM public.list_fold_entries(e.org_id, %3$L, array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(1))
          FROM (SELECT %2$s FROM new_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) e(org_id, list, at, id, attrs)
          GROUP BY e.org_id;
        ELSIF TG_OP = 'DELETE' THEN
          PERFORM public.list_fold_entries(e.org_id, %3$L, array_agg(e.at), array_agg(e.id), array_agg(e.attrs),
            array_agg(-1))
          FROM (SELECT %2$s FROM old_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) e(org_id, list, at, id, attrs)
          GROUP BY e.org_id;
        ELSE
          -- Empty arrays, not NULL, where every entry changed in place: the list is kept as it is.
          PERFORM public.list_fold_entries(e.org_id, %3$L,
            coalesce(array_agg(e.at) FILTER (WHERE e.delta <> 0), '{}'), coalesce(array_agg(e.id) FILTER (WHERE e.delta <> 0), '{}'),
            coalesce(array_agg(e.attrs) FILTER (WHERE e.delta <> 0), '{}'), coalesce(array_agg(e.delta::int) FILTER (WHERE e.delta <> 0), '{}'))
          FROM (SELECT x.org_id, x.at, x.id, x.attrs, sum(x.delta) AS delta
                FROM (SELECT %2$s, -1 FROM old_rows r WHERE r.is_active AND r.org_id = ANY (v_built)
                      UNION ALL
                      SELECT %2$s, 1 FROM new_rows r WHERE r.is_active AND r.org_id = ANY (v_built)) x(org_id, list, at, id, attrs, delta)
                GROUP BY 1, 2, 3, 4) e
          GROUP BY e.org_id;
        END IF;
        RETURN NULL;
      END IF;
      -- Each entry written takes one turn; the change holding every 512th is marked to fold.
      IF TG_OP = 'INSERT' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT %2$s, 1, nextval('public.list_turns') %% 512 = 0 FROM new_rows r WHERE r.is_active;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT %2$s, -1, nextval('public.list_turns') %% 512 = 0 FROM old_rows r WHERE r.is_active;
      ELSE
        -- An entry that left one list for another of its organization writes two changes and
        -- takes one turn, on the change that joins.
        INSERT INTO public.list_changes (org_id, list, at, id, attrs, delta, fold)
        SELECT e.org_id, e.list, e.at, e.id, e.attrs, e.delta,
               CASE WHEN e.delta < 0 AND e.changes > 1 THEN false ELSE nextval('public.list_turns') %% 512 = 0 END
        FROM (SELECT x.org_id, x.list, x.at, x.id, x.attrs, sum(x.delta) AS delta,
                     count(*) OVER (PARTITION BY x.org_id, x.id) AS changes
              FROM (SELECT %2$s, -1 AS delta FROM old_rows r WHERE r.is_active
                    UNION ALL
                    SELECT %2$s, 1 FROM new_rows r WHERE r.is_active) x(org_id, list, at, id, attrs, delta)
              GROUP BY x.org_id, x.list, x.at, x.id, x.attrs) e;
      END IF;
      RETURN NULL;
    END $body$ $f$, v_function, v_entry, p_list);
END $$;

SELECT list_install(list) FROM list_definitions ORDER BY list;
