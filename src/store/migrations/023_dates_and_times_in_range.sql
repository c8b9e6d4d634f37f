-- compatible-from: 12
--
-- (Expand only: CHECK constraints. Release 1.1.0 only reads these tables.)
--
-- Dates and timestamps from year 1 to 9999 in UTC (src/schemas/field-rules.ts, `checkOf`): the
-- years RFC 3339 writes in four digits, which the API's dates and date-times are. PostgreSQL's
-- date and timestamptz also take `infinity`, `-infinity`, years before 1 (BC) and after 9999. A
-- row the salon software wrote with `infinity` made every page that held it fail (500) for every
-- integrator; a year after 9999 came out in five digits, which JavaScript's Date.parse refuses and
-- which sorts before 9999 as text; a year BC came out without its era, a year too late. The import
-- refuses them now too (it took an instant that its offset moved past either end).
--
-- As in 020: one ALTER TABLE per table, its constraints validated at once, in one scan of the
-- table. A row that breaks one fails the migration, which changes nothing
-- (docs/operators/upgrading.md finds the rows).
ALTER TABLE customers
  ADD CONSTRAINT customers_date_of_birth_check CHECK (date_of_birth BETWEEN '0001-01-01' AND '9999-12-31'),
  ADD CONSTRAINT customers_created_at_check CHECK (created_at BETWEEN '0001-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999999Z'),
  ADD CONSTRAINT customers_updated_at_check CHECK (updated_at BETWEEN '0001-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999999Z');

ALTER TABLE appointments
  ADD CONSTRAINT appointments_start_at_check CHECK (start_at BETWEEN '0001-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999999Z'),
  ADD CONSTRAINT appointments_end_at_check CHECK (end_at BETWEEN '0001-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999999Z'),
  ADD CONSTRAINT appointments_created_at_check CHECK (created_at BETWEEN '0001-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999999Z'),
  ADD CONSTRAINT appointments_updated_at_check CHECK (updated_at BETWEEN '0001-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999999Z');
