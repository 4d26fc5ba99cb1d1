// The schema validator of @apidevtools/swagger-parser (the official Swagger 2.0 and
// OpenAPI 3.0/3.1 JSON Schemas through Ajv), which the package does not type on its own.
declare module '@apidevtools/swagger-parser/lib/validators/schema.js' {
  /** Throws a SyntaxError listing what does not fit the schema of the document's version. */
  const validateSchema: (api: unknown) => void;
  export default validateSchema;
}
