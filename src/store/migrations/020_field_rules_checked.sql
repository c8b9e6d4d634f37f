-- compatible-from: 12
--
-- (Expand only: CHECK constraints, and one replaced by its equivalent in ASCII digits. Release
-- 1.1.0 only reads these tables.)
--
-- Every described field's rule in the table itself (src/schemas/field-rules.ts): the import
-- checked ids' and texts' lengths, but the salon software writes the tables directly, and only a
-- CHECK stands between it and the data. Each expression is field-rules.ts's `checkOf`, and
-- test/store/field-checks.test.ts writes every refused value into every column of its type.
--
-- One ALTER TABLE per table, its constraints validated at once: one scan of the table checks
-- them all. Not NOT VALID then VALIDATE: `migrate` runs every file in one transaction, so the
-- ACCESS EXCLUSIVE lock that ADD CONSTRAINT takes is held until the commit whatever VALIDATE
-- takes, and a VALIDATE per constraint would read the table once for each. A row that breaks a
-- rule fails the migration ("check constraint "customers_notes_check" of relation "customers"
-- is violated by some row"), which changes nothing; docs/operators/upgrading.md finds the rows.
--
-- day_key's CHECK of 001 said `\d`, which under a locale other than C also matches digits of
-- other scripts; the import and the API's pattern say [0-9].
ALTER TABLE customers
  ADD CONSTRAINT customers_org_id_check CHECK (length(org_id) BETWEEN 1 AND 128),
  ADD CONSTRAINT customers_support_id_check CHECK (length(support_id) <= 10000),
  ADD CONSTRAINT customers_first_name_check CHECK (length(first_name) <= 10000),
  ADD CONSTRAINT customers_last_name_check CHECK (length(last_name) <= 10000),
  ADD CONSTRAINT customers_display_name_check CHECK (length(display_name) <= 10000),
  ADD CONSTRAINT customers_email_check CHECK (length(email) <= 10000),
  ADD CONSTRAINT customers_phone_check CHECK (length(phone) <= 10000),
  ADD CONSTRAINT customers_primary_phone_check CHECK (length(primary_phone) <= 10000),
  ADD CONSTRAINT customers_secondary_phone_check CHECK (length(secondary_phone) <= 10000),
  ADD CONSTRAINT customers_gender_check CHECK (length(gender) <= 10000),
  ADD CONSTRAINT customers_notes_check CHECK (length(notes) <= 10000),
  ADD CONSTRAINT customers_address_line1_check CHECK (length(address_line1) <= 10000),
  ADD CONSTRAINT customers_city_check CHECK (length(city) <= 10000),
  ADD CONSTRAINT customers_region_check CHECK (length(region) <= 10000),
  ADD CONSTRAINT customers_postal_code_check CHECK (length(postal_code) <= 10000),
  ADD CONSTRAINT customers_preferred_staff_id_check CHECK (length(preferred_staff_id) BETWEEN 1 AND 128);

ALTER TABLE appointments
  ADD CONSTRAINT appointments_org_id_check CHECK (length(org_id) BETWEEN 1 AND 128),
  ADD CONSTRAINT appointments_customer_id_check CHECK (length(customer_id) BETWEEN 1 AND 128),
  ADD CONSTRAINT appointments_staff_id_check CHECK (length(staff_id) BETWEEN 1 AND 128),
  ADD CONSTRAINT appointments_service_id_check CHECK (length(service_id) BETWEEN 1 AND 128),
  ADD CONSTRAINT appointments_resource_id_check CHECK (length(resource_id) BETWEEN 1 AND 128),
  ADD CONSTRAINT appointments_note_check CHECK (length(note) <= 10000),
  ADD CONSTRAINT appointments_payment_id_check CHECK (length(payment_id) BETWEEN 1 AND 128),
  ADD CONSTRAINT appointments_invoice_id_check CHECK (length(invoice_id) BETWEEN 1 AND 128),
  DROP CONSTRAINT appointments_day_key_check,
  ADD CONSTRAINT appointments_day_key_check CHECK (day_key ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$');
