package directorstandin

// schemaSDL is the part of Compass Director's GraphQL schema that KEB uses, with Compass's type
// and argument names and its default page size.
const schemaSDL = `
"""Labels is a JSON object of label keys to values."""
scalar Labels
"""Any is any JSON value."""
scalar Any
"""PageCursor is an opaque cursor."""
scalar PageCursor
"""Timestamp is an RFC 3339 time."""
scalar Timestamp

enum RuntimeStatusCondition {
	INITIAL
	PROVISIONING
	CONNECTED
	FAILED
}

input RuntimeInput {
	name: String!
	description: String
	labels: Labels
	statusCondition: RuntimeStatusCondition
}

"""LabelFilter selects runtimes with the label key whose value matches query, e.g. $[*] ? (@ == "value")."""
input LabelFilter {
	key: String!
	query: String
}

type Label {
	key: String!
	value: Any!
}

type RuntimeStatus {
	condition: RuntimeStatusCondition!
	timestamp: Timestamp!
}

type Runtime {
	id: ID!
	name: String!
	description: String
	labels(key: String): Labels
	status: RuntimeStatus!
	auths: [RuntimeSystemAuth!]
}

"""RuntimeSystemAuth is a credential of a runtime; each one-time token creates one."""
type RuntimeSystemAuth {
	id: ID!
}

type PageInfo {
	startCursor: PageCursor!
	endCursor: PageCursor!
	hasNextPage: Boolean!
}

type RuntimePage {
	data: [Runtime!]!
	pageInfo: PageInfo!
	totalCount: Int!
}

type OneTimeTokenForRuntime {
	token: String!
	connectorURL: String!
}

"""BundleInstanceAuth holds a bundle's credentials for the runtime asking: {"basic": {"username", "password"}} or {"oauth": {"clientId", "clientSecret", "url"}}."""
type BundleInstanceAuth {
	credentials: Any
}

type Bundle {
	id: ID!
	name: String!
	description: String
	instanceAuth: BundleInstanceAuth
}

type BundlePage {
	data: [Bundle!]!
	pageInfo: PageInfo!
	totalCount: Int!
}

type Application {
	id: ID!
	name: String!
	description: String
	providerName: String
	labels: Labels
	bundles: BundlePage!
}

type ApplicationPage {
	data: [Application!]!
	pageInfo: PageInfo!
	totalCount: Int!
}

type Query {
	runtimes(filter: [LabelFilter!], first: Int = 200, after: PageCursor): RuntimePage!
	runtime(id: ID!): Runtime
	applicationsForRuntime(runtimeID: ID!, first: Int = 200, after: PageCursor): ApplicationPage!
}

type Mutation {
	registerRuntime(in: RuntimeInput!): Runtime!
	updateRuntime(id: ID!, in: RuntimeInput!): Runtime!
	unregisterRuntime(id: ID!): Runtime!
	setRuntimeLabel(runtimeID: ID!, key: String!, value: Any!): Label!
	requestOneTimeTokenForRuntime(id: ID!): OneTimeTokenForRuntime!
	deleteSystemAuthForRuntime(authID: ID!): RuntimeSystemAuth!
}
`
