-- The whole v1 schema. Every tenant table leads its keys with org_id, so one
-- organization's rows sit together in every index and a composite foreign key
-- can never point into another organization.

CREATE TABLE organizations (
  id          text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 128),
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  plan        text NOT NULL CHECK (plan IN ('free', 'starter', 'professional', 'enterprise')),
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE users (
  id          text PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 128),
  email       text NOT NULL CHECK (position('@' IN email) > 1),
  name        text,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE memberships (
  org_id      text NOT NULL REFERENCES organizations (id),
  user_id     text NOT NULL REFERENCES users (id),
  role        text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, user_id)
);

CREATE TABLE api_keys (
  org_id        text NOT NULL REFERENCES organizations (id),
  id            text NOT NULL,
  name          text,
  env           text NOT NULL CHECK (env IN ('test', 'live')),
  key_hash      text NOT NULL CHECK (key_hash ~ '^[0-9a-f]{64}$'),
  hint          text NOT NULL,
  created_by    text REFERENCES users (id),
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz,
  revoked_at    timestamptz,
  last_used_at  timestamptz,
  PRIMARY KEY (org_id, id)
);
CREATE UNIQUE INDEX api_keys_id_key ON api_keys (id);
CREATE UNIQUE INDEX api_keys_key_hash_key ON api_keys (key_hash);

CREATE TABLE staff (
  org_id      text NOT NULL REFERENCES organizations (id),
  id          text NOT NULL CHECK (length(id) BETWEEN 1 AND 128),
  name        text,
  is_active   boolean NOT NULL DEFAULT true,
  PRIMARY KEY (org_id, id)
);

CREATE TABLE services (
  org_id      text NOT NULL REFERENCES organizations (id),
  id          text NOT NULL CHECK (length(id) BETWEEN 1 AND 128),
  name        text,
  is_active   boolean NOT NULL DEFAULT true,
  PRIMARY KEY (org_id, id)
);

CREATE TABLE customers (
  org_id                    text NOT NULL REFERENCES organizations (id),
  id                        text NOT NULL CHECK (length(id) BETWEEN 1 AND 128),
  support_id                text,
  first_name                text,
  last_name                 text,
  display_name              text,
  email                     text,
  phone                     text,
  primary_phone             text,
  secondary_phone           text,
  preferred_contact_method  text CHECK (preferred_contact_method IN ('email', 'phone', 'sms', 'whatsapp', 'none')),
  date_of_birth             date,
  gender                    text,
  notes                     text,
  marketing_consent         boolean,
  address_line1             text,
  city                      text,
  region                    text,
  postal_code               text,
  country                   text CHECK (country ~ '^[A-Z]{2}$'),
  preferred_staff_id        text,
  is_active                 boolean NOT NULL,
  created_at                timestamptz NOT NULL,
  updated_at                timestamptz NOT NULL,
  PRIMARY KEY (org_id, id),
  FOREIGN KEY (org_id, preferred_staff_id) REFERENCES staff (org_id, id)
);
-- Serves the list order and the exact count (index-only) of active customers.
CREATE INDEX customers_active_list_idx ON customers (org_id, created_at DESC, id DESC) WHERE is_active;

CREATE TABLE appointments (
  org_id                   text NOT NULL REFERENCES organizations (id),
  id                       text NOT NULL CHECK (length(id) BETWEEN 1 AND 128),
  customer_id              text,
  staff_id                 text,
  service_id               text,
  start_at                 timestamptz NOT NULL,
  end_at                   timestamptz NOT NULL,
  status                   text NOT NULL CHECK (status IN ('scheduled', 'confirmed', 'checked_in', 'no_show', 'cancelled', 'completed')),
  location_type            text CHECK (location_type IN ('in_person', 'online', 'phone', 'customer_address')),
  resource_id              text,
  price_cents              integer CHECK (price_cents >= 0),
  currency                 text CHECK (currency ~ '^[A-Z]{3}$'),
  note                     text,
  payment_status           text CHECK (payment_status IN ('not_required', 'unpaid', 'pending', 'partially_paid', 'paid', 'refunded', 'failed')),
  amount_paid_cents        integer CHECK (amount_paid_cents >= 0),
  payment_kind             text CHECK (payment_kind IN ('card', 'cash', 'online', 'bank_transfer', 'gift_card', 'other')),
  payment_id               text,
  invoice_id               text,
  requires_payment         boolean,
  confirmed_after_payment  boolean,
  day_key                  text CHECK (day_key ~ '^\d{4}-\d{2}-\d{2}$'),
  is_active                boolean NOT NULL,
  created_at               timestamptz NOT NULL,
  updated_at               timestamptz NOT NULL,
  PRIMARY KEY (org_id, id),
  CHECK (end_at >= start_at),
  FOREIGN KEY (org_id, customer_id) REFERENCES customers (org_id, id),
  FOREIGN KEY (org_id, staff_id) REFERENCES staff (org_id, id),
  FOREIGN KEY (org_id, service_id) REFERENCES services (org_id, id)
);
-- One index per filter, each in list order, so every filter is an index range
-- read in order and every count is index-only.
CREATE INDEX appointments_active_list_idx ON appointments (org_id, start_at DESC, id DESC) WHERE is_active;
CREATE INDEX appointments_active_status_idx ON appointments (org_id, status, start_at DESC, id DESC) WHERE is_active;
CREATE INDEX appointments_active_customer_idx ON appointments (org_id, customer_id, start_at DESC, id DESC) WHERE is_active;
CREATE INDEX appointments_active_staff_idx ON appointments (org_id, staff_id, start_at DESC, id DESC) WHERE is_active;

-- Row-level security: the second, independent tenant wall. Policies admit only
-- rows of the organization named by the transaction-local setting
-- openbook.org_id; unset or empty admits nothing.
ALTER TABLE organizations ENABLE ROW LEVEL SECURITY;
ALTER TABLE organizations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_isolation ON organizations
  USING (id = current_setting('openbook.org_id', true));

DO $$
DECLARE t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['memberships', 'api_keys', 'staff', 'services', 'customers', 'appointments'] LOOP
    EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
    EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
    EXECUTE format(
      'CREATE POLICY tenant_isolation ON %I USING (org_id = current_setting(''openbook.org_id'', true))', t);
  END LOOP;
END $$;

-- Authentication happens before the organization is known: a caller may see
-- the one key row whose secret it presented, and nothing else.
CREATE POLICY key_lookup ON api_keys FOR SELECT
  USING (key_hash = current_setting('openbook.key_hash', true));

CREATE FUNCTION openbook_authenticate(p_key_hash text)
RETURNS TABLE (key_id text, org_id text, last_used_at timestamptz)
LANGUAGE plpgsql
-- The SET clause confines search_path only: openbook.key_hash stays set until
-- the end of the transaction, so the caller clears it (queries/api-keys.ts).
SET search_path = pg_catalog, public
AS $$
BEGIN
  PERFORM set_config('openbook.key_hash', p_key_hash, true);
  RETURN QUERY
    SELECT k.id, k.org_id, k.last_used_at
    FROM public.api_keys k
    WHERE k.key_hash = p_key_hash
      AND k.revoked_at IS NULL
      AND (k.expires_at IS NULL OR k.expires_at > now());
END
$$;
