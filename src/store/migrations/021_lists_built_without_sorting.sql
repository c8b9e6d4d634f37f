-- compatible-from: 12
--
-- (A planner setting of one function: release 1.1.0 does not call it.)
--
-- list_build counts a list again from its rows, each of its lists read in its order along the
-- index that holds it, never sorted (enable_sort off). That setting leaves the planner free to read
-- an index that holds only a prefix of a list's order and sort the rest (Incremental Sort): with a
-- third `many` filter whose column was still empty, it did so for one of the eight lists. Turned
-- off too; test/store/list-definitions.test.ts holds every function that turns sorts off to it.
ALTER FUNCTION list_build(text, text) SET enable_incremental_sort = off;
