package connectorstandin

// schemaSDL is the part of Compass Connector's GraphQL schema that the Runtime Agent uses, with
// Compass's type and field names. Both endpoints serve it.
const schemaSDL = `
type Token {
	token: String!
}

type CertificateSigningRequestInfo {
	subject: String!
	keyAlgorithm: String!
}

type ManagementPlaneInfo {
	directorURL: String
	certificateSecuredConnectorURL: String
}

type Configuration {
	token: Token
	certificateSigningRequestInfo: CertificateSigningRequestInfo
	managementPlaneInfo: ManagementPlaneInfo
}

"""CertificationResult's fields are base64 of PEM: the chain is the client certificate, then the CA."""
type CertificationResult {
	certificateChain: String!
	caCertificate: String!
	clientCertificate: String!
}

type Query {
	configuration: Configuration!
}

type Mutation {
	signCertificateSigningRequest(csr: String!): CertificationResult!
	revokeCertificate: Boolean!
}
`
